// Prints the hand-written per-site rules of @postlight/parser (src/extractors/custom/*/index.js)
// as JSON: for each extractor folder, its domains and the string selectors of title, dek,
// author, date and content (selectors and clean). Functions (transforms) are left out.
//
//   node mercury_rules.js PARSER_DIR > rules.json
'use strict';
const fs = require('fs');
const path = require('path');
const vm = require('vm');

const root = path.join(process.argv[2], 'src', 'extractors', 'custom');
const strings = (list) => (Array.isArray(list) ? list : []).filter(
  (s) => typeof s === 'string' || (Array.isArray(s) && s.every((x) => typeof x === 'string')),
);
const out = {};
for (const dir of fs.readdirSync(root).sort()) {
  const file = path.join(root, dir, 'index.js');
  if (!fs.existsSync(file)) continue;
  // The files are ES modules of one object literal; the few imports are only used inside
  // transform functions, which are never called here.
  const src = fs.readFileSync(file, 'utf8')
    .replace(/^import .*$/gm, '')
    .replace(/export const (\w+)\s*=/g, 'exports.$1 =');
  const sandbox = { exports: {}, URL: {} };
  try {
    vm.runInNewContext(src, sandbox, { filename: file });
  } catch (e) {
    process.stderr.write(`${dir}: ${e.message}\n`);
    continue;
  }
  const ex = Object.values(sandbox.exports)[0];
  if (!ex || !ex.content) continue;
  const sel = (field) => strings(field && field.selectors);
  out[dir] = {
    domains: [ex.domain, ...(ex.supportedDomains || [])],
    title: sel(ex.title),
    dek: sel(ex.dek),
    author: sel(ex.author),
    date: sel(ex.date_published),
    content: sel(ex.content),
    clean: strings(ex.content.clean),
    default_cleaner: ex.content.defaultCleaner !== false,
  };
}
process.stdout.write(JSON.stringify(out, null, 1) + '\n');
