/**
 * Which sets a principal may read the values of, command by command, for POST /explain (docs/security.md,
 * "Explanations"). An explanation lists every value the store holds for a key down the command's set hierarchy; a
 * shadowed one at a set the caller could not export is withheld (`withheld: 'scope'`, core/explain.ts).
 *
 * A set is readable for command i when the principal could export command i with its `set` changed to that set:
 * the same scope check as POST /export (./scopes.ts, refusedCommands), with the same store, the same keys and
 * labels. Defined through that check so that the two can never disagree.
 */
import type { EvalCommandInput } from '../../core/types.js';
import { refusedCommands, type Principal } from './scopes.js';

/** `(set, command) => may read`, or undefined when the principal may read every set (full access). */
export function readableSets(
  principal: Principal,
  commands: readonly EvalCommandInput[],
  defaultStore: string | undefined,
  serverSchema?: Parameters<typeof refusedCommands>[3],
): ((set: string, command: number) => boolean) | undefined {
  if (principal.grants === 'all') return undefined;
  // A pipeline's commands share sets (the root, their common ancestors): each answer once per command and set.
  const known = new Map<string, boolean>();
  return (set, command) => {
    const id = `${command}\u0000${set}`;
    let may = known.get(id);
    if (may === undefined) {
      may = refusedCommands(principal, [{ ...commands[command]!, set }], defaultStore, serverSchema).length === 0;
      known.set(id, may);
    }
    return may;
  };
}
