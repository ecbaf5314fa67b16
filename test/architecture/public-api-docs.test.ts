import ts from 'typescript';
import { relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ENTRIES, publicApiProgram, root } from './public-api-program.js';
/**
 * Modules whose public members (what the package's entry points export, and their members) must carry a
 * doc comment, which editors show on hover. The rest of the public API (the core's and the store's
 * classes, the export manager) is still to be documented member by member; add a module here once it is.
 */
const DOCUMENTED = [
  /^src\/connector\/(connector|registry|capabilities|settings-section|lazy-connector|sink-paths)\.ts$/,
  /^src\/testing\//,
  /^src\/duckdb\/sql\.ts$/,
];

describe('the public API', () => {
  it('has a doc comment on every member of the documented modules', () => {
    const { checker, entrySymbol } = publicApiProgram();
    const documented = (s: ts.Symbol) =>
      ts.displayPartsToString(s.getDocumentationComment(checker)).trim() !== '' || s.getJsDocTags().length > 0;
    const missing = new Set<string>();
    for (const entry of ENTRIES) {
      for (const exported of checker.getExportsOfModule(entrySymbol(entry))) {
        const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
        const file = relative(root, symbol.declarations?.[0]?.getSourceFile().fileName ?? '');
        if (!DOCUMENTED.some((m) => m.test(file))) continue;
        if (!documented(symbol)) missing.add(`${file}: ${symbol.name}`);
        for (const member of symbol.members?.values() ?? []) {
          const declaration = member.declarations?.[0];
          // Type parameters are documented with @typeParam on their declaration.
          if (!declaration || ts.isTypeParameterDeclaration(declaration) || member.name === '__constructor') continue;
          if (ts.getCombinedModifierFlags(declaration) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) continue;
          if (!documented(member)) missing.add(`${file}: ${symbol.name}.${member.name}`);
        }
      }
    }
    expect([...missing]).toEqual([]);
  });
});
