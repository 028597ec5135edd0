/** The history view (to be built: docs/console.md). */
export function HistoryView() {
  return <p>This view is not built yet.</p>;
}
