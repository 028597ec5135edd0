/** Glob expansion for `--schema`: the loader lives in src/config (the server reads `.configu`'s schemas too). */
export { expandGlob, MAGIC } from '../config/glob.js';
