// Finding Chromium for the console bench as the browser tests do (CHROMIUM_PATH, else the PATH), with the flags that
// keep Debian's Chromium off the network.
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const executable = (file) => {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

export function findChromium() {
  if (process.env.CHROMIUM_PATH) return executable(process.env.CHROMIUM_PATH) ? process.env.CHROMIUM_PATH : undefined;
  for (const dir of (process.env.PATH ?? '').split(delimiter).filter(Boolean)) {
    for (const name of ['chromium', 'chromium-browser', 'google-chrome-stable', 'google-chrome']) if (executable(join(dir, name))) return join(dir, name);
  }
  return undefined;
}
