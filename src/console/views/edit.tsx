/** The edit view (to be built: docs/console.md). */
export function EditView() {
  return <p>This view is not built yet.</p>;
}
