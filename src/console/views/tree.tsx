/**
 * The sets of the current store (`GET /sets`) as the hierarchy they are: `prod/eu` under `prod`, the root set first
 * as "(root)". A set the store does not hold but that has sets below it is shown all the same (it exists by
 * inheritance: its values are its ancestors'), marked "no values". A WAI-ARIA tree with a roving tabindex: Up and
 * Down move, Right opens or goes to the first child, Left closes or goes to the parent, Home and End, Enter or Space
 * selects the set (the URL's `set`). The selected set is revealed (its ancestors opened).
 */
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import type { SetList } from '../api.js';
import { Show, useLoad } from '../components.js';
import { useConsole } from '../context.js';
import './tree.css';

export interface SetNode {
  path: string;
  name: string;
  /** The store holds values at this set (it was listed). */
  held: boolean;
  children: SetNode[];
  parent?: SetNode;
}

/** The hierarchy of the listed sets: every ancestor of a listed set is a node; the root first when `withRoot`. */
export function buildTree(sets: readonly string[], withRoot: boolean): SetNode[] {
  const nodes = new Map<string, SetNode>();
  const top: SetNode[] = [];
  const nodeOf = (path: string): SetNode => {
    let node = nodes.get(path);
    if (node) return node;
    const cut = path.lastIndexOf('/');
    node = { path, name: path.slice(cut + 1), held: false, children: [] };
    nodes.set(path, node);
    if (cut < 0) top.push(node);
    else {
      node.parent = nodeOf(path.slice(0, cut));
      node.parent.children.push(node);
    }
    return node;
  };
  for (const set of sets) if (set !== '') nodeOf(set).held = true;
  const byName = (a: SetNode, b: SetNode): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  const sort = (list: SetNode[]): void => {
    list.sort(byName);
    for (const n of list) sort(n.children);
  };
  sort(top);
  return withRoot ? [{ path: '', name: '(root)', held: sets.includes(''), children: [] }, ...top] : top;
}

interface Visible {
  node: SetNode;
  level: number;
  /** Position among its siblings (from 1) and their number. */
  position: number;
  size: number;
}

/** The nodes shown, in order: the children of open nodes; with a filter, the matches and their ancestors, all open. */
function visibleNodes(roots: SetNode[], open: ReadonlySet<string>, filter: string): Visible[] {
  const needle = filter.trim().toLowerCase();
  const matches = (n: SetNode): boolean => n.name.toLowerCase().includes(needle) || n.children.some(matches);
  const out: Visible[] = [];
  const walk = (list: SetNode[], level: number): void => {
    const shown = needle ? list.filter(matches) : list;
    shown.forEach((node, i) => {
      out.push({ node, level, position: i + 1, size: shown.length });
      if (node.children.length && (needle || open.has(node.path))) walk(node.children, level + 1);
    });
  };
  walk(roots, 1);
  return out;
}

const ancestorsOf = (set: string): string[] => set.split('/').slice(0, -1).map((_, i, parts) => parts.slice(0, i + 1).join('/'));

/** Below this many sets, every node starts open. */
const OPEN_ALL_BELOW = 50;

export function SetTree() {
  const { api, store, changes } = useConsole();
  const name = store!.name;
  const loaded = useLoad((signal) => api.request<SetList>(`/sets?store=${encodeURIComponent(name)}`, { signal }), [name, changes.seq]);
  return (
    <Show loaded={loaded} what="the sets">
      {(list) => (list.store === name ? <Tree list={list} /> : <p class="muted">Loading the sets…</p>)}
    </Show>
  );
}

function Tree({ list }: { list: SetList }) {
  const { route, navigate } = useConsole();
  const withRoot = list.sets.includes('') || list.withheld === 0;
  const roots = useMemo(() => buildTree(list.sets, withRoot), [list, withRoot]);
  const [open, setOpen] = useState<ReadonlySet<string>>(() => (list.sets.length < OPEN_ALL_BELOW ? new Set(list.sets.flatMap(ancestorsOf)) : new Set()));
  const [filter, setFilter] = useState('');
  const selected = route.set;
  const [active, setActive] = useState<string | undefined>(selected);
  const tree = useRef<HTMLUListElement>(null);
  const wantFocus = useRef(false);

  // A page opened without a set starts at the root, or at the first set the credential may read.
  useEffect(() => {
    if (selected === undefined && roots[0]) navigate({ set: withRoot ? '' : (list.sets[0] ?? roots[0].path) }, { replace: true });
  }, [selected, roots]);
  // The selected set is revealed.
  useEffect(() => {
    if (selected === undefined) return;
    setActive(selected);
    const hidden = ancestorsOf(selected).filter((a) => !open.has(a));
    if (hidden.length) setOpen(new Set([...open, ...hidden]));
  }, [selected]);

  const shown = visibleNodes(roots, open, filter);
  const index = Math.max(0, shown.findIndex((v) => v.node.path === active));
  const current = shown[index];
  useLayoutEffect(() => {
    if (!wantFocus.current || !current) return;
    wantFocus.current = false;
    tree.current?.querySelector<HTMLElement>(`[data-path="${CSS.escape(current.node.path)}"]`)?.focus();
  });

  const toggle = (path: string, to: boolean): void => {
    const next = new Set(open);
    if (to) next.add(path);
    else next.delete(path);
    setOpen(next);
  };
  const move = (to: Visible | undefined): void => {
    if (!to) return;
    wantFocus.current = true;
    setActive(to.node.path);
  };
  const onKeyDown = (e: KeyboardEvent): void => {
    if (!current || e.altKey || e.ctrlKey || e.metaKey) return;
    const node = current.node;
    const isOpen = node.children.length > 0 && (filter.trim() !== '' || open.has(node.path));
    const keys: Record<string, () => void> = {
      ArrowDown: () => move(shown[index + 1]),
      ArrowUp: () => move(shown[index - 1]),
      Home: () => move(shown[0]),
      End: () => move(shown[shown.length - 1]),
      ArrowRight: () => (node.children.length === 0 ? undefined : isOpen ? move(shown[index + 1]) : toggle(node.path, true)),
      ArrowLeft: () => (isOpen ? toggle(node.path, false) : move(shown.find((v) => v.node === node.parent))),
      Enter: () => navigate({ set: node.path }),
      ' ': () => navigate({ set: node.path }),
    };
    const action = keys[e.key];
    if (!action) return;
    e.preventDefault();
    action();
  };

  return (
    <div class="set-tree">
      <input type="search" class="tree-filter" aria-label="Filter sets" placeholder="Filter sets" value={filter} onInput={(e) => setFilter((e.target as HTMLInputElement).value)} />
      {list.withheld > 0 && (
        <p class="muted tree-note">
          {list.withheld} {list.withheld === 1 ? 'set' : 'sets'} hidden by your scope
        </p>
      )}
      {list.truncated && <p class="muted tree-note">Listing truncated: the store holds more sets than are listed here.</p>}
      {shown.length === 0 ? (
        <p class="muted">{filter.trim() ? 'No set matches the filter.' : 'This store holds no set you may read.'}</p>
      ) : (
        <ul role="tree" aria-label="Sets" ref={tree} onKeyDown={onKeyDown}>
          {shown.map((v) => (
            <Item
              key={v.node.path}
              v={v}
              isOpen={v.node.children.length > 0 && (filter.trim() !== '' || open.has(v.node.path))}
              selected={selected === v.node.path}
              active={current?.node.path === v.node.path}
              toggle={toggle}
              setActive={setActive}
            />
          ))}
        </ul>
      )}
    </div>
  );
}

interface ItemProps {
  v: Visible;
  isOpen: boolean;
  selected: boolean;
  active: boolean;
  toggle(path: string, to: boolean): void;
  setActive(path: string): void;
}

/**
 * One set: the items are one flat list, each saying its level, position and siblings' number (as ARIA allows for a
 * tree without groups), so an item's text is its own name only.
 */
function Item({ v, isOpen, selected, active, toggle, setActive }: ItemProps) {
  const { navigate } = useConsole();
  const { node, level } = v;
  const hasChildren = node.children.length > 0;
  return (
    <li
      role="treeitem"
      data-path={node.path}
      style={{ paddingLeft: `${0.3 + (level - 1)}rem` }}
      aria-level={level}
      aria-posinset={v.position}
      aria-setsize={v.size}
      aria-expanded={hasChildren ? isOpen : undefined}
      aria-selected={selected}
      tabIndex={active ? 0 : -1}
      onFocus={() => setActive(node.path)}
      onClick={() => (setActive(node.path), navigate({ set: node.path }))}
    >
      <span class={`chevron${hasChildren ? '' : ' leaf'}`} aria-hidden="true" onClick={(e) => hasChildren && (e.stopPropagation(), toggle(node.path, !isOpen))}>
        {hasChildren ? (isOpen ? '▾' : '▸') : ''}
      </span>
      <span class={node.held ? 'set-name' : 'set-name folder'}>
        {node.name}
        {!node.held && <span class="muted"> (no values)</span>}
      </span>
    </li>
  );
}
