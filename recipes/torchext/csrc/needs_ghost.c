int ghost_value(void);
int twice_ghost(void) { return 2 * ghost_value(); }
