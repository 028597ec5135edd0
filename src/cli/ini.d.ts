// The part of the `ini` package the CLI uses: the package ships no types.
declare module 'ini' {
  interface EncodeOptions {
    /** `key = value` instead of `key=value`. */
    whitespace?: boolean;
  }
  const ini: {
    stringify(object: Record<string, unknown>, options?: EncodeOptions): string;
    parse(text: string): Record<string, unknown>;
  };
  export default ini;
}
