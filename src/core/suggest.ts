/** "Did you mean ...?" for misspelt property names in `.configu`. */

/** Edit distance with transpositions (optimal string alignment), compared case-insensitively. */
function distance(a: string, b: string): number {
  const s = a.toLowerCase();
  const t = b.toLowerCase();
  const d: number[][] = Array.from({ length: s.length + 1 }, (_, i) => [i, ...new Array<number>(t.length).fill(0)]);
  for (let j = 1; j <= t.length; j++) d[0]![j] = j;
  for (let i = 1; i <= s.length; i++) {
    for (let j = 1; j <= t.length; j++) {
      const cost = s[i - 1] === t[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && s[i - 1] === t[j - 2] && s[i - 2] === t[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[s.length]![t.length]!;
}

/**
 * The known name closest to `word`, when it is close enough to be a slip of the keyboard: a different case, or at
 * most one edit per three characters of the known name (`timout` -> `timeout`, `tablename` -> `tableName`, but
 * `extra` suggests nothing). Ties go to the first name in `known`.
 */
export function closestName(word: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const name of known) {
    const dist = distance(word, name);
    if (dist <= Math.max(1, Math.floor(name.length / 3)) && dist < bestDistance) {
      best = name;
      bestDistance = dist;
    }
  }
  return best;
}

/**
 * The known names close to `word` by the rule of closestName, closest first (ties in the order of `known`), at most
 * `max` of them.
 */
export function closestNames(word: string, known: readonly string[], max = 3): string[] {
  const near: Array<{ name: string; dist: number; i: number }> = [];
  known.forEach((name, i) => {
    const dist = distance(word, name);
    if (dist <= Math.max(1, Math.floor(name.length / 3))) near.push({ name, dist, i });
  });
  return near
    .sort((a, b) => a.dist - b.dist || a.i - b.i)
    .slice(0, max)
    .map((n) => n.name);
}

/** The message for an unknown property: `unknown property "x" (did you mean "y"? allowed here: ...)`. */
export function unknownPropertyMessage(property: string, extra: string, known: readonly string[]): string {
  const hint = closestName(extra, known);
  const allowed = known.length ? `allowed here: ${known.join(', ')}` : 'nothing is allowed here';
  return `unknown property "${property}" (${hint ? `did you mean "${hint}"? ` : ''}${allowed})`;
}
