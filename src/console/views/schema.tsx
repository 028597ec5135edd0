/** The schema view (to be built: docs/console.md). */
export function SchemaView() {
  return <p>This view is not built yet.</p>;
}
