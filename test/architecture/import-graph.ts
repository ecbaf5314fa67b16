import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

/** One import of a module: what it names, where it resolves (a repository path, or undefined for a package) and how. */
export interface ImportEdge {
  from: string;
  to: string;
  /** `import type` / `export type`: erased at run time. */
  typeOnly: boolean;
  /** `await import(...)`: loaded when the code runs, not when the module loads. */
  dynamic: boolean;
}

/** Every .ts file under `dirs` (relative to `root`), with the repository-relative imports each makes. */
export function importGraph(
  root: string,
  dirs: string[],
): { files: string[]; edges: ImportEdge[]; calls: (method: string) => { file: string; line: number }[] } {
  const files = dirs.flatMap((d) => walk(join(root, d))).map((f) => relative(root, f));
  const sources = new Map(files.map((f) => [f, ts.createSourceFile(f, readFileSync(join(root, f), 'utf8'), ts.ScriptTarget.Latest, true)]));
  const edges: ImportEdge[] = [];
  for (const [file, source] of sources) {
    const add = (specifier: string, typeOnly: boolean, dynamic: boolean) => {
      if (!specifier.startsWith('.')) return;
      const target = resolveTs(root, file, specifier);
      if (target) edges.push({ from: file, to: target, typeOnly, dynamic });
    };
    const visit = (node: ts.Node): void => {
      if (
        (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
        node.moduleSpecifier &&
        ts.isStringLiteral(node.moduleSpecifier)
      ) {
        const typeOnly = ts.isImportDeclaration(node)
          ? Boolean(node.importClause?.isTypeOnly) ||
            Boolean(
              node.importClause &&
              !node.importClause.name &&
              node.importClause.namedBindings &&
              ts.isNamedImports(node.importClause.namedBindings) &&
              node.importClause.namedBindings.elements.length > 0 &&
              node.importClause.namedBindings.elements.every((e) => e.isTypeOnly),
            )
          : node.isTypeOnly;
        add(node.moduleSpecifier.text, typeOnly, false);
      } else if (
        ts.isCallExpression(node) &&
        node.expression.kind === ts.SyntaxKind.ImportKeyword &&
        node.arguments[0] &&
        ts.isStringLiteral(node.arguments[0])
      ) {
        add(node.arguments[0].text, false, true);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  /** Where `<anything>.<method>(...)` is called. */
  const calls = (method: string) =>
    [...sources].flatMap(([file, source]) => {
      const found: { file: string; line: number }[] = [];
      const visit = (node: ts.Node): void => {
        if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && node.expression.name.text === method) {
          found.push({ file, line: source.getLineAndCharacterOfPosition(node.getStart()).line + 1 });
        }
        ts.forEachChild(node, visit);
      };
      visit(source);
      return found;
    });
  return { files, edges, calls };
}

/** Cycles among the static imports (type-only ones included: they tie the modules' designs together too). */
export function cycles(edges: ImportEdge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const e of edges) if (!e.dynamic) next.set(e.from, [...(next.get(e.from) ?? []), e.to]);
  // Tarjan's strongly connected components: each component of more than one module holds a cycle.
  let index = 0;
  const indices = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const connect = (v: string) => {
    indices.set(v, index);
    low.set(v, index++);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!indices.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, indices.get(w)!));
    }
    if (low.get(v) === indices.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (next.get(v) ?? []).includes(v)) found.push(component.sort());
    }
  };
  for (const v of new Set(edges.map((e) => e.from))) if (!indices.has(v)) connect(v);
  return found;
}

function walk(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (name === 'node_modules' || name === 'dist') return [];
    return statSync(path).isDirectory() ? walk(path) : /\.(ts|cts|mts)$/.test(name) && !name.endsWith('.d.ts') ? [path] : [];
  });
}

function resolveTs(root: string, from: string, specifier: string): string | undefined {
  const base = resolve(root, dirname(from), specifier);
  for (const candidate of [base.replace(/\.js$/, '.ts'), base.replace(/\.cjs$/, '.cts'), base, `${base}.ts`, join(base, 'index.ts')]) {
    if (existsSync(candidate) && statSync(candidate).isFile()) return relative(root, candidate);
  }
  return undefined;
}
