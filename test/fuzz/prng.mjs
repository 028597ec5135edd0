// The one seeded PRNG of the test and benchmark tools (the fuzzer's generator, bench/soak.mjs). Plain JavaScript so
// that the .mjs benchmarks import it without a loader; its types are in prng.d.mts.

/** mulberry32: tiny, fast, good enough to drive a fuzzer; the same seed gives the same stream on every platform. */
export function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
