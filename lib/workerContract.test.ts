// The handler's encoding: what the operator writes into CONVEYOR_HANDLER the worker reads back.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { encodeHandler, handlerFromFields, parseHandler, type HandlerFields } from "./workerContract.ts";

describe("worker contract: the handler", () => {
  const cases: [HandlerFields, string, ReturnType<typeof parseHandler>][] = [
    [{ module: "/app/ocr.js" }, "module:/app/ocr.js", { kind: "module", path: "/app/ocr.js" }],
    [{ http: { port: 8080 } }, "http://127.0.0.1:8080/", { kind: "http", url: "http://127.0.0.1:8080/" }],
    [
      { http: { port: 9000, path: "/run" } },
      "http://127.0.0.1:9000/run",
      { kind: "http", url: "http://127.0.0.1:9000/run" },
    ],
    [
      { command: ["/bin/convert", "-", 'a "q"'] },
      'command:["/bin/convert","-","a \\"q\\""]',
      { kind: "command", argv: ["/bin/convert", "-", 'a "q"'] },
    ],
    [
      { python: { callable: "app.handlers:extract" } },
      "python:app.handlers:extract",
      { kind: "python", callable: "app.handlers:extract" },
    ],
  ];
  for (const [fields, text, spec] of cases)
    it(`${Object.keys(fields)[0]}: the pool's fields → ${text} → the worker's spec`, () => {
      assert.equal(encodeHandler(handlerFromFields(fields)), text);
      assert.deepEqual(parseHandler(text), spec);
      assert.equal(encodeHandler(parseHandler(text)), text);
    });

  it("a pool's handler must name exactly one kind", () => {
    for (const fields of [{}, { module: "/m.js", command: ["x"] }])
      assert.throws(
        () => handlerFromFields(fields),
        /^Error: exactly one of module, http, command or python must be set$/,
      );
  });

  it("bad text names what is wrong", () => {
    assert.throws(() => parseHandler("module:"), /module: needs a path/);
    assert.throws(() => parseHandler("command:[]"), /non-empty JSON array of strings/);
    assert.throws(() => parseHandler("command:ls -l"), /JSON array of arguments/);
    assert.throws(() => parseHandler("python:app"), /module\.path:function/);
    assert.throws(() => parseHandler("ftp://x"), /unknown handler "ftp:\/\/x"/);
  });
});
