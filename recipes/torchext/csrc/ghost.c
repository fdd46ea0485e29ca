int ghost_value(void) { return 42; }
