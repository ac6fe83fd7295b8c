// The book's sliders without a kernel (lib.book.widgets.explore, _ext/book_explore.py).
// Every frame was drawn when the chapter was executed; this script only shows the one the slider points at.
"use strict";
(function () {
  function setUp(box) {
    const control = box.querySelector(".book-explore-control");
    const frames = Array.from(box.querySelectorAll("img.book-explore-frame"));
    if (!control || frames.length === 0 || box.classList.contains("book-explore-live")) return;
    const labels = JSON.parse(control.dataset.labels);
    const name = control.dataset.name;
    const label = document.createElement("label");
    const input = document.createElement("input");
    const value = document.createElement("output");
    input.type = "range";
    input.min = "0";
    input.max = String(frames.length - 1);
    input.step = "1";
    input.value = control.dataset.default;
    input.setAttribute("aria-label", name);
    label.className = "book-explore-name";
    label.textContent = name;
    label.append(input);
    value.className = "book-explore-value";
    function show() {
      const chosen = Number(input.value);
      frames.forEach(function (frame, i) { frame.classList.toggle("book-explore-current", i === chosen); });
      value.textContent = name + " = " + labels[chosen];
      input.setAttribute("aria-valuetext", value.textContent);
    }
    input.addEventListener("input", show);
    control.append(label, value);
    box.classList.add("book-explore-live");
    show();
  }
  function setUpAll() { document.querySelectorAll(".book-explore").forEach(setUp); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUpAll);
  else setUpAll();
})();
