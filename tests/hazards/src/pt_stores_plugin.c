/* The strong record layout of pt_stores_weak.c: counts the records it places. */
static long placed;
long record_offset(int i) {
  placed++;
  return 64L * i;
}
long records_placed(void) { return placed; }
