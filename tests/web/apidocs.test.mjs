// The API reference page (/api/v10/docs): it renders the server's own
// OpenAPI document in the browser, every operation grouped by tag, and a
// link to an operation opens it, under the page's own CSP without a violation.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, watchCsp } from "./harness.mjs";

const env = serverAndBrowser();

test("the API reference renders every operation of the OpenAPI document", async () => {
  const doc = await (await fetch(env.server.url + "/api/v10/openapi.json")).json();
  const operations = Object.values(doc.paths).reduce((n, item) => n + Object.keys(item).length, 0);
  assert.ok(operations > 100, `${operations} operations`);

  const ctx = await env.browser.newContext();
  const csp = await watchCsp(ctx);
  const page = await ctx.newPage();
  page.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await page.goto(env.server.url + "/api/v10/docs#createMessage");
  await page.waitForFunction(() => document.body.dataset.ready);
  assert.equal(await page.locator("#ops section details[id]:not([id^=schema-])").count(), operations);
  assert.equal(await page.locator("#schemas details").count(), Object.keys(doc.components.schemas).length);
  // The linked operation is open, with its body and answers.
  const op = page.locator("details#createMessage");
  assert.equal(await op.evaluate((d) => d.open), true, "the linked operation is open");
  await op.getByText("Body: application/json").waitFor();
  await op.getByText("multipart/form-data").waitFor();
  // A schema reference links to its definition, which then opens.
  await op.locator("a.ref").filter({ hasText: /^Message$/ }).first().click();
  await page.waitForFunction(() => document.getElementById("schema-Message").open);
  await page.locator("details#createMessage summary").scrollIntoViewIfNeeded();
  await shot(page, "api-docs");
  assert.deepEqual(await csp.check(page), { events: [], messages: [] });
  await ctx.close();
});
