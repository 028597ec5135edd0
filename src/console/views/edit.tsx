/**
 * The editor (view `edit`): every key of the route's named schema at the route's set, with the value the set stores
 * itself (POST /explain tells stored from inherited) in an input the user may change or remove; Preview sends the
 * write as a dry run and shows its diff and impact (./impact.tsx); Save names the previewed revision and a message.
 * A change notice touching the set reloads the values under the user's edits: an edited input keeps what the user
 * typed and says what someone else wrote meanwhile; the others follow, highlighted.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import type { KeyDeclaration, SchemaDocument } from '../api.js';
import { Masked, Show, setLabel } from '../components.js';
import { useConsole } from '../context.js';
import { useWriteFlow, WritePanel, type Send } from './impact.js';
import { hierarchyOf, upsert, useLatest, useTouched, valuesAt, writeRights, type KeyAtSet, type WriteRights } from './write-api.js';
import './edit.css';

export function EditView() {
  const { api, session, store, route } = useConsole();
  const schemaName = route.schema;
  const set = route.set ?? '';
  const schema = useLatest(() => (schemaName ? api.schema(schemaName) : Promise.resolve(undefined)), [schemaName]);
  if (!store) return null;
  // What the grants refuse for the whole set is said before anything else is read.
  const refused = writeRights(session, store, set, undefined).refused;
  return (
    <section class="edit" aria-labelledby="edit-title">
      <h1 id="edit-title">
        Edit {setLabel(set)} <span class="muted">· {schemaName ? `schema ${schemaName} · ` : ''}store {store.name}</span>
      </h1>
      {refused ? (
        <p class="refused" role="note">
          <strong>This set cannot be edited:</strong> {refused}. The Values view shows what it holds.
        </p>
      ) : !schemaName ? (
        <p>Choose a schema in the header: the editor shows its keys at the set.</p>
      ) : (
        <Show loaded={schema} what="the schema">
          {(doc) => <Editor key={`${store.name}\n${set}\n${schemaName}`} schema={doc!} schemaName={schemaName} set={set} rights={writeRights(session, store, set, doc)} />}
        </Show>
      )}
    </section>
  );
}

/** A key the user changed: its new value (null: removed at this set) and what the set stored when the user started. */
interface Edit {
  value: string | null;
  base: KeyAtSet['stored'];
}

const sameStored = (a: KeyAtSet['stored'], b: KeyAtSet['stored']): boolean => JSON.stringify(a) === JSON.stringify(b);

/** Keys whose stored value differs between two loads. */
function changedBetween(before: Map<string, KeyAtSet> | undefined, after: Map<string, KeyAtSet>): Set<string> {
  const changed = new Set<string>();
  if (!before) return changed;
  for (const [key, now] of after) if (!sameStored(before.get(key)?.stored ?? null, now.stored)) changed.add(key);
  return changed;
}

/** The keys whose stored value changed with the last reload (their rows get the `.changed` highlight). */
function useFlash(values: Map<string, KeyAtSet> | undefined): Set<string> {
  const [flash, setFlash] = useState<Set<string>>(new Set());
  const previous = useRef<Map<string, KeyAtSet> | undefined>(undefined);
  useEffect(() => {
    if (!values) return;
    const changed = changedBetween(previous.current, values);
    previous.current = values;
    if (changed.size === 0) return;
    setFlash(new Set());
    requestAnimationFrame(() => setFlash(changed));
  }, [values]);
  return flash;
}

const changedWords = (n: number): string => (n === 0 ? 'No change yet.' : `${n} key${n === 1 ? '' : 's'} changed, not saved.`);

interface EditorProps {
  schema: SchemaDocument;
  schemaName: string;
  set: string;
  rights: WriteRights;
}

function Editor({ schema, schemaName, set, rights }: EditorProps) {
  const { api, store, changes, announce } = useConsole();
  const [edits, setEdits] = useState<Record<string, Edit>>({});
  const [reloads, setReloads] = useState(0);
  const touched = useTouched(changes, hierarchyOf(set));
  const loaded = useLatest(() => valuesAt(api, store!.name, set, schemaName), [reloads, touched]);
  const values = loaded.state === 'done' ? loaded.value : undefined;
  const flash = useFlash(values);
  // Once saved, the user's edits give way to the values read after the write (not before: no flash of the old ones).
  const savedFrom = useRef<Map<string, KeyAtSet> | undefined>(undefined);
  const giveWay = savedFrom.current !== undefined && values !== savedFrom.current;
  const shown = giveWay ? {} : edits;
  useEffect(() => {
    if (giveWay) (savedFrom.current = undefined), setEdits({});
  }, [values]);

  const pending = (): Record<string, string | null> =>
    Object.fromEntries(Object.entries(edits).map(([k, e]) => [k, e.value === '' ? null : e.value]));
  const send: Send = (options) => upsert(api, { store: store!.name, set, schema: schemaName, values: pending(), ...options });
  const write = useWriteFlow(api, { store: store!.name, set }, rights.mayBreak, send, (answer) => {
    savedFrom.current = values ?? new Map();
    setReloads((n) => n + 1);
    announce(`Saved: ${setLabel(answer.set)} is now at revision ${answer.revision}`);
  });
  // A preview shows exactly what Save sends: changing an input closes it.
  const edited = useRef(edits);
  useEffect(() => {
    if (edited.current !== edits && write.flow.step === 'preview') write.close();
    edited.current = edits;
  }, [edits]);
  const previewedAt = useRef(touched);
  const preview = (): void => {
    if (Object.keys(edits).length === 0) return announce('Nothing to preview: change a value first');
    previewedAt.current = touched;
    void write.preview();
  };
  const onKeyDown = (e: KeyboardEvent): void => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) (e.preventDefault(), preview());
    else if (e.key === 'Escape' && write.flow.step !== 'idle') (e.preventDefault(), write.close());
  };
  const setEdit = (key: string, value: string | null | undefined): void =>
    setEdits((all) => {
      const { [key]: _old, ...rest } = all;
      const stored = values?.get(key)?.stored ?? null;
      if (value === undefined || (typeof stored === 'string' && value === stored) || (stored === null && (value === null || value === ''))) return rest;
      return { ...rest, [key]: { value, base: all[key]?.base ?? stored } };
    });

  return (
    <div class="editor" onKeyDown={onKeyDown}>
      <Show loaded={loaded} what="the values at this set">
        {(current) => <EditTable schema={schema} set={set} values={current} edits={shown} rights={rights} flash={flash} setEdit={setEdit} />}
      </Show>
      <div class="actions">
        <button type="button" class="primary" onClick={preview} aria-keyshortcuts="Control+Enter">
          Preview
        </button>
        <button type="button" onClick={() => (setEdits({}), write.close())} disabled={Object.keys(shown).length === 0}>
          Discard my changes
        </button>
        <span class="muted">{changedWords(Object.keys(shown).length)}</span>
      </div>
      {write.flow.step === 'preview' && touched !== previewedAt.current && (
        <p class="stale" role="status">
          This set, or a set it inherits from, changed after the preview: Save may be refused.{' '}
          <button type="button" onClick={preview}>
            Preview again
          </button>
        </p>
      )}
      <WritePanel
        write={write}
        title={`Preview of the write at ${setLabel(set)}`}
        hidden={(k) => schema.keys[k]?.hidden === true}
        reviewAgain={() => (setReloads((n) => n + 1), preview())}
      />
    </div>
  );
}

interface EditTableProps {
  schema: SchemaDocument;
  set: string;
  values: Map<string, KeyAtSet>;
  edits: Record<string, Edit>;
  rights: WriteRights;
  flash: Set<string>;
  setEdit(key: string, value: string | null | undefined): void;
}

function EditTable({ schema, set, values, edits, rights, flash, setEdit }: EditTableProps) {
  return (
    <table class="edit-table">
      <caption class="muted">
        Values stored at {setLabel(set)} itself; an empty value removes the key here, so the set inherits it. Ctrl+Enter previews.
      </caption>
      <thead>
        <tr>
          <th scope="col">Key</th>
          <th scope="col">Value at this set</th>
          <th scope="col">Without it here</th>
          <th scope="col">
            <span class="visually-hidden">Remove</span>
          </th>
        </tr>
      </thead>
      <tbody>
        {Object.entries(schema.keys).map(([key, decl]) => (
          <KeyRow key={key} name={key} decl={decl} at={values.get(key)} edit={edits[key]} refused={rights.keyRefused(key)} flash={flash.has(key)} setEdit={setEdit} />
        ))}
      </tbody>
    </table>
  );
}

/** The words for a stored value in a note ("changed by someone else"): never a hidden value. */
const storedWords = (stored: KeyAtSet['stored']): string => (stored === null ? '(no value here)' : typeof stored === 'string' ? JSON.stringify(stored) : 'a new hidden value');

interface KeyRowProps {
  name: string;
  decl: KeyDeclaration;
  at: KeyAtSet | undefined;
  edit: Edit | undefined;
  refused: string | undefined;
  flash: boolean;
  setEdit(key: string, value: string | null | undefined): void;
}

function KeyRow({ name, decl, at, edit, refused, flash, setEdit }: KeyRowProps) {
  const stored = at?.stored ?? null;
  const id = `edit-${name}`;
  const readOnly = decl.const !== undefined ? 'computed by const: never stored' : decl.lazy ? 'lazy: given only as an override, never stored' : refused;
  const theirs = edit && !sameStored(edit.base, stored);
  return (
    <tr class={`${flash ? 'changed' : ''}${edit ? ' edited' : ''}`}>
      <th scope="row">
        {readOnly ? (
          <code>{name}</code>
        ) : (
          <label for={id}>
            <code>{name}</code>
          </label>
        )}
        {decl.description && <div class="muted description">{decl.description}</div>}
      </th>
      <td>
        {readOnly ? (
          <span class="read-only">
            {stored === null ? <span class="muted">(none)</span> : typeof stored === 'string' ? <code class="value">{JSON.stringify(stored)}</code> : <Masked />}{' '}
            <span class="muted">— read-only: {readOnly}</span>
          </span>
        ) : (
          <KeyInput id={id} name={name} decl={decl} stored={stored} edit={edit} setEdit={setEdit} />
        )}
        {edit && (edit.value === null || edit.value === '') && <div class="note">Will be removed at this set.</div>}
        {theirs && (
          <div class="note theirs" role="status">
            changed by someone else since you started: {storedWords(stored)}
          </div>
        )}
      </td>
      <td class="muted">{at?.inherited ?? ''}</td>
      <td>
        {!readOnly && (stored !== null || edit?.value === null) && (
          <button type="button" aria-label={`${edit?.value === null ? 'Keep' : 'Remove at this set'}: ${name}`} onClick={() => setEdit(name, edit?.value === null ? undefined : null)}>
            {edit?.value === null ? 'Keep' : 'Remove at this set'}
          </button>
        )}
      </td>
    </tr>
  );
}

interface KeyInputProps {
  id: string;
  name: string;
  decl: KeyDeclaration;
  stored: KeyAtSet['stored'];
  edit: Edit | undefined;
  setEdit(key: string, value: string | null | undefined): void;
}

function KeyInput({ id, name, decl, stored, edit, setEdit }: KeyInputProps) {
  const onInput = (e: Event): void => setEdit(name, (e.target as HTMLInputElement | HTMLSelectElement).value);
  if (decl.hidden) {
    return (
      <span class="hidden-input">
        <input
          id={id}
          type="password"
          autocomplete="new-password"
          spellcheck={false}
          placeholder="unchanged unless typed"
          aria-describedby={`${id}-hidden`}
          value={typeof edit?.value === 'string' ? edit.value : ''}
          onInput={(e) => {
            const v = (e.target as HTMLInputElement).value;
            setEdit(name, v === '' ? undefined : v);
          }}
        />{' '}
        <span id={`${id}-hidden`} class="muted">
          hidden{stored !== null ? ': a value is stored here, never shown' : ': no value here'}
        </span>
      </span>
    );
  }
  const value = edit ? (edit.value ?? '') : typeof stored === 'string' ? stored : '';
  if (Array.isArray(decl.enum)) {
    const options = decl.enum.map(String);
    if (value !== '' && !options.includes(value)) options.push(value);
    return (
      <select id={id} value={value} onChange={onInput}>
        <option value="">(no value at this set)</option>
        {options.map((o) => (
          <option key={o} value={o}>
            {o}
          </option>
        ))}
      </select>
    );
  }
  return <input id={id} type="text" spellcheck={false} autocomplete="off" value={value} onInput={onInput} />;
}
