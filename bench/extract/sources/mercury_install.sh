#!/usr/bin/env bash
# Installs @postlight/parser 2.2.3 where it can run offline: its git dependencies do not
# install from the registry, so its registry dependencies are installed by name and the
# package itself is unpacked beside them.   bash mercury_install.sh DIR
set -euo pipefail
DIR="${1:?usage: mercury_install.sh DIR}"
mkdir -p "$DIR" && cd "$DIR"
[ -f package.json ] || echo '{"name":"mercury-run","version":"1.0.0","private":true}' > package.json
npm install -q --no-audit --no-fund --ignore-scripts cheerio@0.22.0 moment@2.31.0 \
  moment-timezone@0.5.37 moment-parseformat@3.1.1 iconv-lite@0.5.2 ellipsize@0.1.0 \
  string-direction@0.1.2 turndown@7.2.5 valid-url@1.0.9 wuzzy@0.1.8 @babel/runtime-corejs2@7.29.13 \
  postman-request@2.88.1-postman.8-beta.1 difflib@0.2.4 jquery@4.1.0 yargs-parser@15.0.3 >/dev/null
npm pack -q @postlight/parser@2.2.3 >/dev/null
mkdir -p node_modules/@postlight/parser
tar xzf postlight-parser-2.2.3.tgz -C node_modules/@postlight/parser --strip-components=1
