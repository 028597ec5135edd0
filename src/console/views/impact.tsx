/**
 * The preview panel of a write, shared by the editor and by rollback: a dry run's changes (key, before → after) and
 * its impact (each named schema at each set: breaks, fixes, changes, unchanged, with the failures after), or the
 * refusal in the problem's own words; then Save with a message, naming the revision the dry run returned, and a
 * conflict (409) shown with the change that came in between and a way to review again.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, type Api, type Problem } from '../api.js';
import { Loading, Masked, ProblemView, problemOf, setLabel } from '../components.js';
import { changesSince, isHiddenValue, type Change, type HistoryRecord, type ImpactEntry, type ShownValue, type WriteAnswer, type WriteOptions } from './write-api.js';
import './impact.css';

export type Send = (options: Pick<WriteOptions, 'dryRun' | 'expectedRevision' | 'message' | 'allowBreaking'>) => Promise<WriteAnswer>;

export type Flow =
  | { step: 'idle' }
  | { step: 'previewing' }
  /** A dry run's answer; `breaks`: the write-breaks problem, when the answer came from a dry run allowed to break. */
  | { step: 'preview'; answer: WriteAnswer; breaks?: Problem; refused?: Problem; saving?: boolean }
  | { step: 'refused'; problem: Problem }
  | { step: 'saved'; answer: WriteAnswer }
  | { step: 'conflict'; problem: Problem; expected: number; others?: HistoryRecord[] | Problem };

const WRITE_BREAKS = 'urn:cfgu:problem:write-breaks';
const CONFLICT = 'urn:cfgu:problem:revision-conflict';

export interface WriteFlow {
  flow: Flow;
  preview(): Promise<void>;
  save(message: string): Promise<void>;
  close(): void;
}

/** The steps of one write: preview (a dry run), save (naming the previewed revision), a conflict's other change. */
export function useWriteFlow(api: Api, where: { store: string; set: string }, mayBreak: boolean, send: Send, onSaved: (answer: WriteAnswer) => void): WriteFlow {
  const [flow, setFlow] = useState<Flow>({ step: 'idle' });
  const preview = async (): Promise<void> => {
    setFlow({ step: 'previewing' });
    try {
      setFlow({ step: 'preview', answer: await send({ dryRun: true }) });
    } catch (e) {
      const problem = problemOf(e);
      if (problem.type === WRITE_BREAKS && mayBreak) {
        // Asked again, allowed to break, to learn the revision to save against; nothing is written.
        try {
          setFlow({ step: 'preview', answer: await send({ dryRun: true, allowBreaking: true }), breaks: problem });
          return;
        } catch (again) {
          setFlow({ step: 'refused', problem: problemOf(again) });
          return;
        }
      }
      setFlow({ step: 'refused', problem });
    }
  };
  const save = async (message: string): Promise<void> => {
    if (flow.step !== 'preview') return;
    const { answer, breaks } = flow;
    setFlow({ ...flow, saving: true });
    try {
      const saved = await send({ message, ...(answer.revision !== null ? { expectedRevision: answer.revision } : {}), ...(breaks ? { allowBreaking: true } : {}) });
      setFlow({ step: 'saved', answer: saved });
      onSaved(saved);
    } catch (e) {
      const problem = problemOf(e);
      if (e instanceof ApiError && problem.type === CONFLICT && answer.revision !== null) {
        const expected = answer.revision;
        setFlow({ step: 'conflict', problem, expected });
        const others = await changesSince(api, where.store, where.set, expected).catch(problemOf);
        setFlow((f) => (f.step === 'conflict' && f.problem === problem ? { ...f, others } : f));
      } else setFlow({ ...flow, saving: false, refused: problem });
    }
  };
  return { flow, preview, save, close: () => setFlow({ step: 'idle' }) };
}

/** A value in a diff: masked when hidden (by the answer, or by a schema's `hidden`), "(absent)" when none. */
export function DiffValue({ value, hidden }: { value: ShownValue; hidden: boolean }) {
  if (isHiddenValue(value) || (hidden && value !== null)) return <Masked />;
  if (value === null) return <span class="muted">(absent)</span>;
  return <code class="value">{JSON.stringify(value)}</code>;
}

export function ChangesTable({ changes, hidden, caption }: { changes: Change[]; hidden: (key: string) => boolean; caption: string }) {
  return (
    <table class="diff">
      <caption>{caption}</caption>
      <thead>
        <tr>
          <th scope="col">Key</th>
          <th scope="col">Before</th>
          <th scope="col">After</th>
        </tr>
      </thead>
      <tbody>
        {changes.map((c) => (
          <tr key={c.key}>
            <th scope="row">
              <code>{c.key}</code>
            </th>
            <td class="before">
              <DiffValue value={c.before} hidden={hidden(c.key)} />
            </td>
            <td class="after">
              <span aria-hidden="true">→ </span>
              <DiffValue value={c.after} hidden={hidden(c.key)} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

const STATUS: Record<string, [string, string, string]> = {
  breaks: ['✗', 'breaks', 'state-failing'],
  fixes: ['✓', 'fixes', 'state-ok'],
  changes: ['~', 'changes', 'effect-changes'],
  unchanged: ['=', 'unchanged', 'muted'],
};

export function ImpactTable({ impact, truncated }: { impact: ImpactEntry[]; truncated?: boolean }) {
  if (impact.length === 0) return <p class="muted">No named schema of the server declares a changed key: no impact to show.</p>;
  return (
    <table class="impact">
      <caption>Impact on the server's schemas{truncated ? ' (the first 50 sets only)' : ''}</caption>
      <thead>
        <tr>
          <th scope="col">Schema</th>
          <th scope="col">Set</th>
          <th scope="col">Effect</th>
          <th scope="col">Keys whose value changes</th>
          <th scope="col">Failures after the write</th>
        </tr>
      </thead>
      <tbody>
        {impact.map((i) => {
          const [symbol, words, cls] = STATUS[i.status] ?? ['?', i.status, ''];
          return (
            <tr key={`${i.schema}\n${i.set}`} class={`impact-${i.status}`}>
              <td>{i.schema}</td>
              <td>{setLabel(i.set)}</td>
              <td>
                <span class={cls}>
                  <span aria-hidden="true">{symbol}</span> {words}
                </span>
              </td>
              <td>{i.changed.length ? i.changed.map((k) => <code key={k}>{k} </code>) : <span class="muted">none</span>}</td>
              <td>
                {i.failures.length === 0 ? (
                  <span class="muted">none</span>
                ) : (
                  <ul class="failures">
                    {i.failures.map((f, n) => (
                      <li key={n}>{f.message}</li>
                    ))}
                  </ul>
                )}
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

/** The records a conflict is about: who wrote the set since the revision saved against, when, why, which keys. */
function OtherChanges({ others }: { others: HistoryRecord[] | Problem | undefined }) {
  if (others === undefined) return <Loading what="the other change" />;
  if (!Array.isArray(others)) return <ProblemView problem={others} title="The other change could not be read" />;
  if (others.length === 0) return <p class="muted">The history shows no newer revision you may read.</p>;
  return (
    <ul class="others">
      {others.map((r) => (
        <li key={r.revision}>
          revision {r.revision}, by <strong>{r.recorded ? (r.subject ?? 'unknown') : 'someone outside cfgu'}</strong>,{' '}
          <time dateTime={r.time} title={r.time}>
            {new Date(r.time).toLocaleString()}
          </time>
          {r.message ? <>: “{r.message}”</> : null} — keys {r.changes.map((c) => c.key).join(', ')}
        </li>
      ))}
    </ul>
  );
}

export interface WritePanelProps {
  write: WriteFlow;
  /** "Preview of the write", "Preview of the rollback to revision 3" */
  title: string;
  hidden: (key: string) => boolean;
  defaultMessage?: string;
  /** Reload what the write was made from and preview again (a conflict's "Review again"). */
  reviewAgain(): void;
}

/** The panel: the preview, the refusal, the saved revision or the conflict. Escape closes it. */
export function WritePanel({ write, title, hidden, defaultMessage, reviewAgain }: WritePanelProps) {
  const { flow } = write;
  const heading = useRef<HTMLHeadingElement>(null);
  const message = useRef<HTMLInputElement>(null);
  useEffect(() => {
    if (flow.step === 'preview' && flow.answer.changes.length > 0 && !flow.refused && !flow.saving) message.current?.focus();
    else heading.current?.focus();
  }, [flow.step, flow.step === 'preview' && flow.refused]);
  if (flow.step === 'idle') return null;
  const onKeyDown = (e: KeyboardEvent): void => {
    if (e.key === 'Escape') (e.preventDefault(), e.stopPropagation(), write.close());
  };
  const close = (
    <button type="button" onClick={write.close}>
      Close
    </button>
  );
  return (
    <section class="write-panel" aria-labelledby="write-panel-title" onKeyDown={onKeyDown}>
      <h2 id="write-panel-title" tabIndex={-1} ref={heading}>
        {flow.step === 'saved' ? 'Saved' : flow.step === 'conflict' ? 'Conflict: the set changed' : title}
      </h2>
      {flow.step === 'previewing' && <Loading what="the preview" />}
      {flow.step === 'refused' && (
        <>
          <ProblemView problem={flow.problem} title="The write would be refused" />
          {Array.isArray(flow.problem.impact) && <ImpactTable impact={flow.problem.impact as ImpactEntry[]} />}
          {close}
        </>
      )}
      {flow.step === 'preview' && <Preview write={write} hidden={hidden} defaultMessage={defaultMessage} messageRef={message} close={close} />}
      {flow.step === 'saved' && (
        <>
          <p class="saved" role="status">
            <span aria-hidden="true">✓</span> Saved as revision <strong>{flow.answer.revision}</strong> of {setLabel(flow.answer.set)}.
          </p>
          <ChangesTable changes={flow.answer.changes} hidden={hidden} caption="What was written" />
          {close}
        </>
      )}
      {flow.step === 'conflict' && (
        <>
          <ProblemView problem={flow.problem} title="Not saved: someone else wrote this set" />
          <p>
            You previewed revision {flow.expected}; the set is now at revision {String(flow.problem.currentRevision ?? '?')}. The other change:
          </p>
          <OtherChanges others={flow.others} />
          <div class="actions">
            <button type="button" class="primary" onClick={reviewAgain}>
              Review again
            </button>
            {close}
          </div>
        </>
      )}
    </section>
  );
}

interface PreviewProps {
  write: WriteFlow;
  hidden: (key: string) => boolean;
  defaultMessage: string | undefined;
  messageRef: { current: HTMLInputElement | null };
  close: ComponentChildren;
}

function Preview({ write, hidden, defaultMessage, messageRef, close }: PreviewProps) {
  const flow = write.flow as Extract<Flow, { step: 'preview' }>;
  const [message, setMessage] = useState(defaultMessage ?? '');
  const [missing, setMissing] = useState(false);
  const { answer } = flow;
  if (answer.changes.length === 0) {
    return (
      <>
        <p>Nothing would change: the set already holds these values (revision {answer.revision ?? 0}).</p>
        {close}
      </>
    );
  }
  const submit = (e: Event): void => {
    e.preventDefault();
    if (message.trim() === '') return setMissing(true);
    void write.save(message.trim());
  };
  return (
    <>
      <p class="muted">
        A dry run at {setLabel(answer.set)} of store {answer.store}, revision {answer.revision ?? 0}: nothing is written yet.
      </p>
      <ChangesTable changes={answer.changes} hidden={hidden} caption={`${answer.changes.length} ${answer.changes.length === 1 ? 'change' : 'changes'} at ${setLabel(answer.set)}`} />
      <ImpactTable impact={answer.impact} truncated={answer.impactTruncated} />
      {flow.breaks && <ProblemView problem={flow.breaks} title="This write breaks a schema" />}
      {flow.refused && <ProblemView problem={flow.refused} title="Not saved" />}
      <form class="save" onSubmit={submit}>
        <label for="write-message">Message (required: why this change)</label>
        <input
          id="write-message"
          ref={messageRef}
          maxLength={500}
          aria-required="true"
          aria-invalid={missing ? 'true' : undefined}
          aria-describedby={missing ? 'write-message-missing' : undefined}
          value={message}
          onInput={(e) => (setMessage((e.target as HTMLInputElement).value), setMissing(false))}
        />
        {missing && (
          <p id="write-message-missing" class="problem-title">
            Say why: the console saves a change only with a message.
          </p>
        )}
        <div class="actions">
          <button type="submit" class="primary" disabled={flow.saving}>
            {flow.breaks ? 'Save anyway' : 'Save'}
          </button>
          {close}
        </div>
      </form>
    </>
  );
}
