/** The matrix view (to be built: docs/console.md). */
export function MatrixView() {
  return <p>This view is not built yet.</p>;
}
