import _ from 'lodash';
import validator from 'validator';
import { O, ownKeys, getOwnPropertyDescriptor } from './intrinsics.js';
import { noteClockOrChance } from './prelude.js';

// ---------------------------------------------------------------------------------------------------------------
// State the libraries keep in their closures, between jobs (docs/expressions.md, "State the libraries keep").
//
// Freezing protects what an expression can reach through properties; what a library keeps in its closures it
// cannot. Each such piece of state is handled here, before the seal: it is made unobservable, or a read of it marks
// the job (kept answers), or what it shares is frozen.
// ---------------------------------------------------------------------------------------------------------------

/**
 * The name every lodash template gets in stack traces. lodash names a template it compiles
 * `lodash.templateSources[<n>]` (a `//# sourceURL` comment), `n` counting every template compiled in the realm:
 * an error thrown by a template's code (or a getter it calls) would show how many templates other jobs compiled.
 * Given a `sourceURL` of the caller's own, lodash does not count.
 */
export const TEMPLATE_SOURCE_URL = 'lodash.templateSource';

type Template = (string?: string, options?: unknown) => unknown;

/** lodash's own test of an iteratee call (`_.map(list, _.template)` passes the index and the list as well). */
function isIterateeCall(value: unknown, index: unknown, object: unknown): boolean {
  if (!_.isObject(object)) return false;
  const holder = object as Record<PropertyKey, unknown>;
  const hit =
    typeof index === 'number'
      ? _.isArrayLike(object) && index > -1 && index % 1 === 0 && index < (object as ArrayLike<unknown>).length
      : typeof index === 'string' && index in holder;
  return hit && _.eq(holder[index as PropertyKey], value);
}

/**
 * lodash: `_.uniqueId` counts on in a closure, so a read marks the job (it is not kept); `_.template` is given a
 * fixed `sourceURL` unless the caller gives one. Both are installed with lodash's own `_.mixin`, so the wrapped forms
 * (`_('x').uniqueId()`, `_.chain(t).template()`), which call the function captured when lodash loaded, use them too.
 */
export function guardLodash(): void {
  const uniqueId = _.uniqueId;
  const template = _.template as unknown as Template;
  const guarded = {
    uniqueId(prefix?: string): string {
      noteClockOrChance();
      return uniqueId(prefix);
    },
    template(string?: string, options?: unknown, guard?: unknown): unknown {
      if (guard && isIterateeCall(string, options, guard)) options = undefined;
      // Read once, as lodash reads it (own and inherited enumerable members); a `sourceURL` of the caller's wins.
      return template(string, _.assignIn({ sourceURL: TEMPLATE_SOURCE_URL }, options));
    },
  };
  _.mixin(_, guarded, { chain: false });
}

const isContainer = (v: unknown): v is object => v !== null && (typeof v === 'object' || typeof v === 'function');

/**
 * validator: the functions that take options fill the caller's options object with their module's defaults
 * (`merge(options, defaults)`), handing out the default arrays themselves (`isEmail`'s `host_blacklist` and
 * `host_whitelist`, `isURL`'s `protocols`, `isDate`'s `delimiters`, `isCurrency`'s `digits_after_decimal`): a job
 * that pushed into one would change what every later `isEmail` / `isURL` ... of every client accepts. Every function
 * is called once here with an options object of ours (as the second argument, and as the third after a locale);
 * whatever objects it filled in are returned, for the seal to freeze with the realm.
 */
export function validatorDefaults(): object[] {
  const found: object[] = [];
  const v = validator as unknown as Record<string, unknown>;
  for (const name of O.keys(v)) {
    const fn = v[name];
    if (typeof fn !== 'function') continue;
    for (const args of [['a'], ['a', 'en-US']]) {
      const probe: Record<string, unknown> = {};
      try {
        (fn as (...a: unknown[]) => unknown)(...args, probe);
      } catch {
        /* a function that wants other arguments: it filled nothing in, or filled it before throwing */
      }
      for (const key of ownKeys(probe)) {
        const desc = getOwnPropertyDescriptor(probe, key);
        if (desc && 'value' in desc && isContainer(desc.value)) found.push(desc.value);
      }
    }
  }
  return found;
}
