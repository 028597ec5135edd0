/** The sets of the current store (to be built as a tree: docs/console.md); for now a list of links. */
import { Show, setLabel, useLoad } from '../components.js';
import { useConsole } from '../context.js';

export function SetTree() {
  const { api, store, route, navigate, changes } = useConsole();
  const loaded = useLoad((signal) => api.request<{ sets: string[] }>(`/sets?store=${encodeURIComponent(store!.name)}`, { signal }), [store?.name, changes.seq]);
  return (
    <Show loaded={loaded} what="the sets">
      {(list) => (
        <ul>
          {list.sets.map((set) => (
            <li key={set}>
              <a href="#" aria-current={route.set === set ? 'true' : undefined} onClick={(e) => (e.preventDefault(), navigate({ set }))}>
                {setLabel(set)}
              </a>
            </li>
          ))}
        </ul>
      )}
    </Show>
  );
}
