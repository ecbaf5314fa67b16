/**
 * How long one busy part of Orderly runs before it gives the event loop back (a macrotask): the backlog
 * read, publishes, a connector's write loop (LoopSlicer). Each busy part runs one slice in the same turn of
 * the loop, after the others, so a turn lasts about their sum plus any garbage collection in it. In 300k
 * drains on the 2-core machine, 5 ms slices left 27 turns over 25 ms in a Parquet drain (longest 51 ms)
 * and 81 in a DuckDB table drain (52 ms); 2.5 ms slices 3 (35 ms) and 20 (46 ms), at the same drain
 * speed. 1.25 ms gave no further gain: the rest of a long turn is collection and waiting for a core.
 */
export const SLICE_MS = 2.5;
