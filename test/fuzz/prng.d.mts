/** mulberry32: a stream of numbers in [0, 1) that depends only on the 32-bit seed. */
export declare function mulberry32(seed: number): () => number;
