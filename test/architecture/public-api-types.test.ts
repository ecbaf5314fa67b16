import ts from 'typescript';
import { relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ENTRIES, publicApiProgram, root } from './public-api-program.js';
/** The entry points a connector author imports: every type their exports name must be importable. */
const AUTHOR_ENTRIES = ['src/connector/index.ts', 'src/testing/index.ts'];

describe('the connector-facing API', () => {
  it('exports every type its exports name (a type only reachable through a member cannot be named outside the package)', () => {
    const { checker, entrySymbol } = publicApiProgram();
    const resolve = (s: ts.Symbol) => (s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s);
    const exportsOf = (entry: string) => checker.getExportsOfModule(entrySymbol(entry)).map(resolve);
    const exported = new Set(ENTRIES.flatMap(exportsOf));
    const ours = (d: ts.Declaration) => {
      const file = relative(root, d.getSourceFile().fileName);
      return !file.startsWith('node_modules') && !file.startsWith('..');
    };
    const missing = new Set<string>();
    const visit = (node: ts.Node, where: string) => {
      if (ts.isTypeReferenceNode(node) || ts.isExpressionWithTypeArguments(node)) {
        const name = ts.isTypeReferenceNode(node) ? node.typeName : node.expression;
        const at = checker.getSymbolAtLocation(name);
        const symbol = at && resolve(at);
        const declaration = symbol?.declarations?.[0];
        if (
          symbol &&
          declaration &&
          ours(declaration) &&
          !ts.isTypeParameterDeclaration(declaration) &&
          (ts.isInterfaceDeclaration(declaration) ||
            ts.isTypeAliasDeclaration(declaration) ||
            ts.isClassDeclaration(declaration) ||
            ts.isEnumDeclaration(declaration)) &&
          !exported.has(symbol)
        )
          missing.add(`${symbol.name} (${relative(root, declaration.getSourceFile().fileName)}), named by ${where}`);
      }
      ts.forEachChild(node, (child) => visit(child, where));
    };
    for (const entry of AUTHOR_ENTRIES) {
      for (const symbol of exportsOf(entry)) {
        for (const declaration of symbol.declarations ?? []) {
          if (!ours(declaration)) continue;
          if (ts.isFunctionDeclaration(declaration)) {
            // Its signature only, not its body.
            for (const p of declaration.parameters) if (p.type) visit(p.type, symbol.name);
            if (declaration.type) visit(declaration.type, symbol.name);
          } else if (ts.isInterfaceDeclaration(declaration) || ts.isTypeAliasDeclaration(declaration)) {
            visit(declaration, symbol.name);
          } else if (ts.isClassDeclaration(declaration)) {
            for (const member of declaration.members) {
              if (ts.getCombinedModifierFlags(member) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) continue;
              if (ts.isPropertyDeclaration(member) && member.type) visit(member.type, `${symbol.name}.${member.name.getText()}`);
              if (ts.isMethodDeclaration(member) || ts.isConstructorDeclaration(member) || ts.isGetAccessorDeclaration(member)) {
                for (const p of member.parameters) if (p.type) visit(p.type, symbol.name);
                if (member.type) visit(member.type, symbol.name);
              }
            }
          } else if (ts.isVariableDeclaration(declaration) && declaration.type) {
            visit(declaration.type, symbol.name);
          }
        }
      }
    }
    expect([...missing].sort()).toEqual([]);
  });
});
