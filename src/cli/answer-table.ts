/**
 * A query's answer as a text table, as DuckDB's own shell prints one: every column named (also when the
 * answer has no rows), a value as SQL shows it (NULL; a string without quotes; a LIST, STRUCT or MAP as JSON
 * at any depth). console.table printed an empty answer as `(index)` alone and a nested value past two
 * levels as `[Object]`. `total` is the answer's row count when `rows` are only its first.
 */
export function answerTable(columns: string[], rows: Record<string, unknown>[], total = rows.length): string {
  const cells = rows.map((row) => columns.map((column) => cellText(row[column] as AnswerValue)));
  const widths = columns.map((column, i) => Math.max(width(column), ...cells.map((line) => width(line[i]!))));
  const rule = (left: string, middle: string, right: string) => `${left}${widths.map((w) => '─'.repeat(w + 2)).join(middle)}${right}`;
  const line = (texts: string[]) => `│${texts.map((text, i) => ` ${text}${' '.repeat(widths[i]! - width(text))} `).join('│')}│`;
  return [
    rule('┌', '┬', '┐'),
    line(columns.map(cellText)),
    rule('├', '┼', '┤'),
    ...cells.map(line),
    rule('└', '┴', '┘'),
    `(${total} ${total === 1 ? 'row' : 'rows'})`,
  ].join('\n');
}

/**
 * Gathers an answer as the query hands it over, a chunk at a time (a RowSink): its columns, its first `limit`
 * rows, and how many more there were, for `table()`.
 */
export function answerCollector(limit = Number.POSITIVE_INFINITY) {
  let columns: string[] = [];
  const shown: Record<string, unknown>[] = [];
  let more = 0;
  return {
    onRows: (rows: Record<string, unknown>[], answerColumns: string[]): void => {
      columns = answerColumns;
      for (const row of rows)
        if (shown.length < limit) shown.push(row);
        else more++;
    },
    /** How many rows of the answer the table leaves out. */
    left: () => more,
    table: () => answerTable(columns, shown, shown.length + more),
  };
}

/** What DuckDB's JSON rows hold (`yieldRowsJson`). */
type AnswerValue = string | number | boolean | object | null | undefined;

function cellText(value: AnswerValue): string {
  const text = value === null || value === undefined ? 'NULL' : typeof value === 'object' ? JSON.stringify(value) : String(value);
  // A line break or tab in a value would break the table's rows.
  return text.replace(/[\n\r\t]/g, (c) => (c === '\n' ? '\\n' : c === '\r' ? '\\r' : '\\t'));
}

const width = (text: string) => [...text].length;
