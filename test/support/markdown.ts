// Markdown as GitHub reads it, for the tests that check links and citations: heading anchors, and
// text with code left out (links and headings inside code are not links or headings).

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces become hyphens. */
export function headingAnchor(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-');
}

/** Code blocks and inline code removed. */
export function stripCode(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
}

/** The anchors of every heading of a page. */
export function anchors(markdown: string): Set<string> {
  const out = new Set<string>();
  for (const m of stripCode(markdown).matchAll(/^#{1,6} +(.+)$/gm)) out.add(headingAnchor(m[1]!));
  return out;
}
