// Runs @postlight/parser (Mercury) offline on pages with its own per-site rules, for sets.py.
// Input on stdin, one JSON object a line: {"id", "html" (a file), "url"}; output, one a line:
// {"id", "title", "dek", "text", "error"}. `fallback: false`: only the site's own extractor
// runs, never the generic one. Installed by bench/extract/run.sh (mercury_install.sh).
'use strict';
const fs = require('fs');
const Parser = require('@postlight/parser');

(async () => {
  const lines = fs.readFileSync(0, 'utf8').split('\n').filter(Boolean);
  for (const line of lines) {
    const page = JSON.parse(line);
    let row;
    try {
      const html = fs.readFileSync(page.html).toString('utf8');
      const res = await Parser.parse(page.url, { html, contentType: 'text', fallback: false });
      row = { id: page.id, title: res.title, dek: res.dek, text: res.content, error: res.error ? res.message : null };
    } catch (e) {
      row = { id: page.id, text: null, error: String(e).slice(0, 300) };
    }
    process.stdout.write(JSON.stringify(row) + '\n');
  }
})();
