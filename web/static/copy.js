// berth console: copy buttons. A button with data-copy="ID" copies the
// text of the element with that id; without the clipboard API (or this
// script) the text stays selectable by hand.
"use strict";
document.addEventListener("click", function (ev) {
  var button = ev.target.closest ? ev.target.closest("button[data-copy]") : null;
  if (!button) return;
  var source = document.getElementById(button.getAttribute("data-copy"));
  if (!source || !navigator.clipboard) return;
  navigator.clipboard.writeText(source.textContent).then(function () {
    var label = button.textContent;
    button.textContent = "Copied";
    setTimeout(function () { button.textContent = label; }, 1500);
  });
});
