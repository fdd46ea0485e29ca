// ${generated_comment}
