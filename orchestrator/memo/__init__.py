"""Remembered answers of repeated commands: what a piece of work read (file_reads, the
foundation every memo's check stands on), the plan memo (plan_memo) and an edited tree's
ninja started ahead of the planner (head_start)."""
