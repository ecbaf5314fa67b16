import ts from 'typescript';
import { fileURLToPath } from 'node:url';

/** The repository's root. */
export const root = fileURLToPath(new URL('../..', import.meta.url));
/** The package's entry points (package.json `exports`), as sources. */
export const ENTRIES = ['src/index.ts', 'src/connector/index.ts', 'src/testing/index.ts'];

/** The package's entry points compiled as the package's users see them, with the checker over them. */
export function publicApiProgram(): { checker: ts.TypeChecker; entrySymbol: (entry: string) => ts.Symbol } {
  const program = ts.createProgram(
    ENTRIES.map((e) => `${root}/${e}`),
    {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      allowImportingTsExtensions: true,
      noEmit: true,
    },
  );
  const checker = program.getTypeChecker();
  const entrySymbol = (entry: string) => checker.getSymbolAtLocation(program.getSourceFile(`${root}/${entry}`)!)!;
  return { checker, entrySymbol };
}
