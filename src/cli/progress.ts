/** A progress indicator on standard error for steps that take over a second (only when standard error is a TTY). */

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/**
 * Run `step`; if it is still running after `delayMs`, show a spinner line with `label` on `stream` until it ends,
 * then erase the line. Silent when `stream` is not a TTY.
 */
export async function withProgress<T>(
  label: string,
  step: () => Promise<T>,
  stream: { write(text: string): unknown; isTTY?: boolean } = process.stderr,
  delayMs = 1000,
): Promise<T> {
  if (!stream.isTTY) return step();
  const started = Date.now();
  let frame = 0;
  let shown = false;
  let interval: NodeJS.Timeout | undefined;
  const draw = () => {
    const seconds = Math.floor((Date.now() - started) / 1000);
    stream.write(`\r\x1b[2K${FRAMES[frame++ % FRAMES.length]} ${label}… ${seconds}s`);
  };
  const timer = setTimeout(() => {
    shown = true;
    draw();
    interval = setInterval(draw, 80);
    interval.unref();
  }, delayMs);
  timer.unref();
  try {
    return await step();
  } finally {
    clearTimeout(timer);
    if (interval) clearInterval(interval);
    if (shown) stream.write('\r\x1b[2K');
  }
}
