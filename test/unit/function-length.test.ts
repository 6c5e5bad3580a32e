// No function in gateway/ is longer than 80 lines, read from the sources with the TypeScript
// compiler's parser. A long function is usually a closure factory: state kept in `let`s shared by
// nested callbacks, which a reader has to hold in mind all at once. So every function, method,
// accessor, constructor, arrow function and function expression counts on its own, and an outer
// function's length includes the functions nested in it. The only exceptions are the two ported
// algorithms, which follow their originals line for line: grisu2 (json/number-print.ts) and
// rapidjson's number reader, readNumber (json/number-parse.ts) — not scanNumber beside it, a fast
// path of our own.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import * as ts from 'typescript';

const ROOT = resolve(__dirname, '../../gateway');
const MAX_LINES = 80;
/** Ported algorithms kept in their originals' shape (by name, wherever they live). */
const ALLOWED = new Set(['grisu2', 'readNumber']);

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') && !p.endsWith('.d.ts') ? [p] : [];
  });
}

type FunctionLike =
  | ts.FunctionDeclaration | ts.MethodDeclaration | ts.ConstructorDeclaration | ts.GetAccessorDeclaration
  | ts.SetAccessorDeclaration | ts.ArrowFunction | ts.FunctionExpression;

function isFunctionLike(node: ts.Node): node is FunctionLike {
  return ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isConstructorDeclaration(node)
    || ts.isGetAccessorDeclaration(node) || ts.isSetAccessorDeclaration(node) || ts.isArrowFunction(node)
    || ts.isFunctionExpression(node);
}

/** The name a reader would search for: the declared name, or the variable/property it is assigned to. */
function nameOf(node: FunctionLike): string {
  if (ts.isConstructorDeclaration(node)) {
    const cls = node.parent;
    return `${ts.isClassLike(cls) && cls.name ? cls.name.text : '(class)'}.constructor`;
  }
  if (node.name !== undefined && !ts.isArrowFunction(node)) return node.name.getText();
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) {
    return parent.name.getText();
  }
  if (ts.isCallExpression(parent)) return `(callback of ${parent.expression.getText().slice(0, 40)})`;
  // An anonymous function is found by the function that holds it.
  for (let up: ts.Node | undefined = parent; up !== undefined; up = up.parent) {
    if (isFunctionLike(up)) return `(anonymous in ${nameOf(up)})`;
  }
  return '(anonymous)';
}

interface LongFunction { line: number; name: string; lines: number }

/** Every function in `source` longer than MAX_LINES, counted from its first line to its last. */
function longFunctions(source: ts.SourceFile): LongFunction[] {
  const found: LongFunction[] = [];
  const visit = (node: ts.Node): void => {
    // Only functions with a body: an overload or an abstract signature has no length of its own.
    if (isFunctionLike(node) && node.body !== undefined) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const name = nameOf(node);
      if (last - first + 1 > MAX_LINES && !ALLOWED.has(name)) found.push({ line: first + 1, name, lines: last - first + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function parse(file: string, text: string): ts.SourceFile {
  return ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
}

describe('function length', () => {
  test(`no function in gateway/ is longer than ${MAX_LINES} lines (ported algorithms aside)`, () => {
    const found = sources(ROOT).flatMap((file) => longFunctions(parse(file, readFileSync(file, 'utf8')))
      .map((f) => `gateway/${relative(ROOT, file)}:${f.line} ${f.name}: ${f.lines} lines`));
    expect(found).toEqual([]);
  });

  test('the checker sees nested functions, arrows, methods and function expressions', () => {
    // A checker that found nothing would pass for any tree; this proves it measures.
    const body = Array.from({ length: MAX_LINES }, (_, i) => `  const v${i} = ${i};`).join('\n');
    const text = [
      'function outer() {', '  const inner = () => {', body, '  };', '}',
      'class K { method() {', body, '} }',
      'const fe = function () {', body, '};',
      'function grisu2() {', body, '}',
      'function short() { return 1; }',
    ].join('\n');
    const names = longFunctions(parse('probe.ts', text)).map((f) => f.name);
    expect(names).toEqual(['outer', 'inner', 'method', 'fe']);
  });
});
