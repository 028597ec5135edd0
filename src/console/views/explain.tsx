/**
 * Why a key has its value at a set, from one key of `POST /explain`'s answer: the sets read, every value the store
 * holds for the key down the hierarchy (the winner marked, the shadowed and overridden ones struck through and named
 * so in words), the override, the default, a const's template and the keys it read, each test with its result, and
 * the failures in the server's words. Hidden values are withheld by the server and shown masked.
 */
import { Masked, setLabel } from '../components.js';
import type { ExplainedCandidate, ExplainedInput, KeyExplanation, Origin } from './read-api.js';

/** A value as the server sent it: the text, masked when hidden, a line when withheld by the scope or absent. */
export function ValueText({ value, withheld }: ExplainedInput) {
  if (withheld === 'hidden') return <Masked />;
  if (withheld === 'scope') return <span class="muted">(withheld: a set outside your scope)</span>;
  if (value === undefined) return <span class="muted">— no value</span>;
  if (value === '') return <span class="muted">(empty text)</span>;
  return <code class="value">{value}</code>;
}

const ORIGINS: Record<Origin, string> = {
  store: 'Value stored at',
  default: "Value from the key's default",
  const: 'Value computed by its const',
  override: "Value from the request's override",
  empty: 'No value',
};

/** Where a value came from, in a word or a set path (the FROM column). */
export function originLabel(origin: Origin, from: string | undefined): string {
  if (origin === 'store') return setLabel(from ?? '');
  return origin === 'empty' ? '(empty)' : origin;
}

const STATUS: Record<ExplainedCandidate['status'], [string, string]> = {
  won: ['✓', 'won'],
  shadowed: ['↷', 'shadowed'],
  overridden: ['↷', 'overridden'],
};

function Candidates({ k }: { k: KeyExplanation }) {
  if (k.const) return null;
  if (k.lazy) return <p class="muted">A lazy key: the store is never asked for it.</p>;
  if (k.candidates.length === 0) return <p>No set of the hierarchy holds a value for it.</p>;
  return (
    <>
      <p class="why-head">Values down the hierarchy (root first)</p>
      <ol class="candidates">
        {k.candidates.map((c) => {
          const [symbol, word] = STATUS[c.status];
          const struck = c.status !== 'won';
          return (
            <li key={c.set} class={`candidate candidate-${c.status}`}>
              <span class="candidate-set">{setLabel(c.set)}</span>
              <span class="candidate-value">{struck ? <s>{<ValueText {...c} />}</s> : <ValueText {...c} />}</span>
              <span class="candidate-status">
                <span aria-hidden="true">{symbol}</span> {word}
              </span>
            </li>
          );
        })}
      </ol>
    </>
  );
}

function Const({ k }: { k: KeyExplanation }) {
  if (!k.const) return null;
  return (
    <>
      <p class="why-head">Const {k.const.computed ? '' : '(failed)'}</p>
      <p>
        <code class="value">{k.const.template}</code>
      </p>
      {k.const.reads.length > 0 && (
        <ul class="reads">
          {k.const.reads.map((r) => (
            <li key={r.key}>
              reads <code>{r.key}</code> = <ValueText {...r} /> <span class="muted">({r.origin})</span>
            </li>
          ))}
        </ul>
      )}
      {k.derivedFromHidden && <p class="muted">Computed from a hidden key: exported all the same.</p>}
    </>
  );
}

function Tests({ k }: { k: KeyExplanation }) {
  if (k.tests.length === 0) return null;
  return (
    <>
      <p class="why-head">Tests</p>
      <ul class="tests">
        {k.tests.map((t) => (
          <li key={t.index} class={t.passed === true ? 'state-ok' : t.passed === false ? 'state-failing' : 'muted'}>
            <span aria-hidden="true">{t.passed === true ? '✓' : t.passed === false ? '✗' : '–'}</span> {t.passed === true ? 'passed' : t.passed === false ? 'failed' : 'not run'}{' '}
            <code>{t.expression}</code>
            {t.message && <span> — {t.message}</span>}
            {t.skipped && <span> ({t.skipped})</span>}
          </li>
        ))}
      </ul>
    </>
  );
}

/** The explanation of one key, shown under its row. `hierarchy`: the sets the command read, root first. */
export function Explanation({ k, hierarchy }: { k: KeyExplanation; hierarchy: readonly string[] }) {
  return (
    <div class="why">
      <p>
        {ORIGINS[k.origin]}
        {k.origin === 'store' ? <strong> {setLabel(k.set)}</strong> : ''}. Sets read: {hierarchy.map(setLabel).join(' › ')}.
      </p>
      <Candidates k={k} />
      {k.override && (
        <p>
          Override: <ValueText {...k.override} />
        </p>
      )}
      {k.default && (
        <p>
          Default: <ValueText {...k.default} /> {k.origin === 'default' ? '(used)' : '(not used)'}
        </p>
      )}
      <Const k={k} />
      <Tests k={k} />
      {k.failures.length > 0 && (
        <>
          <p class="why-head">Failures</p>
          <ul class="failures">
            {k.failures.map((f, i) => (
              <li key={i} class="state-failing">
                <span aria-hidden="true">✗</span> {f.rule}: {f.message}
              </li>
            ))}
          </ul>
        </>
      )}
      {k.hidden && <p class="muted">Hidden: the server never sends its value.</p>}
    </div>
  );
}
