// The grammar of a `python:` handler's callable, `module.path:function`: shared by the worker's
// handler spec and the WorkerPool schema (the Python kit's CALLABLE_PATTERN is the same).
export const PYTHON_CALLABLE_PATTERN =
  "^[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$";

const CALLABLE = new RegExp(PYTHON_CALLABLE_PATTERN);

export function assertCallable(text: string): void {
  if (!CALLABLE.test(text))
    throw new Error(
      `python: takes module.path:function (a Python module importable from the worker's directory, and a function in it), e.g. python:app.handlers:extract, got ${JSON.stringify(text)}`,
    );
}
