/** What the model reads about the size of the answer: how many of how many, and whether it was cut. */
export function resultNote(
  returned: number,
  total: number,
  noun: string,
  limit: number,
  max: number,
  requestedLimit: number | undefined,
): string {
  const clamped = requestedLimit === undefined ? '' : ` The limit ${requestedLimit} was clamped to ${limit}.`;
  if (total === 0)
    return `No ${noun} match these filters.${clamped} Try wider filters; do not repeat the same call.`;
  if (returned >= total) return `Returned all ${total} matching ${noun}.${clamped}`;
  const more = limit < max ? ` Raise limit (at most ${max}) or narrow the filters` : ' Narrow the filters';
  return `Returned ${returned} of ${total} matching ${noun}; the list was cut at ${limit}.${clamped}${more} to see the rest.`;
}
