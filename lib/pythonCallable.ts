// The grammar of a `python:` handler's callable, `module.path:function`: shared by the worker's
// handler spec and the WorkerPool schema (the Python kit's CALLABLE_PATTERN is the same).
export const PYTHON_CALLABLE_PATTERN =
  "^[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$";
