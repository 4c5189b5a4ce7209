// berth console: progressive enhancement only. Every page works without
// this script; with it, a server page updates itself from the server's
// event stream, and the command box runs without a reload. Nothing here
// turns text from a sandbox into markup: fragments come from berth's own
// templates, which escape it.
"use strict";
