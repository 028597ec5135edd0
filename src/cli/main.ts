/**
 * The `cfgu` binary (bundled to dist/cli.js, started by bin/cfgu.js). A table of sub-commands: each entry is a
 * one-line summary and a function from its arguments to an exit code. Add a sub-command by adding a row.
 */
import { serveCommand } from './serve.js';
import { evalCommand } from './commands/eval.js';
import { exportCommand } from './commands/export.js';
import { upsertCommand } from './commands/upsert.js';

export interface SubCommand {
  summary: string;
  run(argv: string[]): Promise<number>;
  /** Exit as soon as `run` resolves (long-running commands whose handles may linger, e.g. `serve`). */
  exitWhenDone?: boolean;
}

export const commands: Record<string, SubCommand> = {
  serve: { summary: 'run the configuration proxy server', run: serveCommand, exitWhenDone: true },
  upsert: { summary: 'validate values and write them to a store', run: upsertCommand, exitWhenDone: true },
  eval: { summary: 'evaluate a schema against a store and print the result (JSON)', run: evalCommand, exitWhenDone: true },
  export: { summary: 'export an eval result from standard input (json, dotenv, yaml, ...)', run: exportCommand, exitWhenDone: true },
};

function usage(): string {
  const width = Math.max(...Object.keys(commands).map((n) => n.length));
  const rows = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return `Usage: cfgu <command> [options]\n\nCommands:\n${rows.join('\n')}\n\nRun "cfgu <command> --help" for a command's options.`;
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${usage()}\n`);
    return name === undefined ? 2 : 0;
  }
  const command = commands[name];
  if (!command) {
    process.stderr.write(`cfgu: unknown command "${name}"\n\n${usage()}\n`);
    return 2;
  }
  return command.run(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    if (commands[process.argv[2] ?? '']?.exitWhenDone) setImmediate(() => process.exit(code));
  },
  (e: unknown) => {
    process.stderr.write(`cfgu: ${(e as Error)?.message?.split('\n')[0] ?? String(e)}\n`);
    process.exit(1);
  },
);
