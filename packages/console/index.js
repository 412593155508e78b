// The console is a web page, not a Node module: what the gateway needs of this package is where its
// built files are (dist/, written by build.mjs), to serve them at /app.
'use strict';
module.exports = { distDir: require('node:path').join(__dirname, 'dist') };
