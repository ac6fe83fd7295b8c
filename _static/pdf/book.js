// The book's print layout (tools/build_pdf.py loads it into the single-page HTML once MathJax is done, then calls
// these functions): the web page becomes the body of a book. Not linked from the HTML book (_ext/book_html.py
// leaves _static/pdf/ out of its pages).
window.bookPdf = {
  // The page as a book's body; returns the outline entries (level, title, id) in document order.
  prepare(parts) {

    const drop = (el) => el && el.remove();
    // A cell tagged hide-input shows its output only: in print its source is left out (its collapsed frame
    // with it), while hide-cell and hide-output cells are opened below.
    document.querySelectorAll('.cell.tag_hide-input > details.above-input, .cell.tag_hide-input > .cell_input')
      .forEach(drop);
    // Collapsed cells open (a <details> becomes a plain <div>: without its summary a browser would label it
    // "Details"), their "Show/Hide code cell ..." labels and every toggle button removed.
    document.querySelectorAll('summary, .toggle-button, button.copybtn, a.headerlink').forEach(drop);
    document.querySelectorAll('details').forEach(d => {
      const div = document.createElement('div');
      div.className = d.className + ' book-opened';
      while (d.firstChild) div.append(d.firstChild);
      d.replaceWith(div);
    });
    document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
    // The site's own print table of contents: the book has its own contents. (The single page holds the chapters
    // inside the front page's toctree-wrapper, which therefore stays.)
    document.querySelectorAll('#jb-print-docs-body').forEach(drop);
    // Empty frames: an output, an input or a whole cell with nothing to see.
    const visible = (el) => el.textContent.trim() !== '' ||
        el.querySelector('img, svg, mjx-container, table, video, iframe, canvas') !== null;
    document.querySelectorAll('.cell_output .output, .cell_output, div.highlight, .cell_input, .cell')
      .forEach(el => { if (!visible(el)) el.remove(); });
    // Code and outputs: one block per line, wrapped with a hanging indent past the line's own indentation.
    document.querySelectorAll('div.highlight pre, .cell_output pre, .output pre').forEach(pre => {
      const segments = [];
      const walk = (node, cls) => {
        node.childNodes.forEach(child => {
          if (child.nodeType === Node.TEXT_NODE) segments.push([child.textContent, cls]);
          else if (child.nodeType === Node.ELEMENT_NODE) walk(child, child.className || cls);
        });
      };
      walk(pre, '');
      const lines = [[]];
      segments.forEach(([text, cls]) => {
        text.split('\n').forEach((piece, i) => {
          if (i > 0) lines.push([]);
          if (piece) lines[lines.length - 1].push([piece, cls]);
        });
      });
      if (lines.length > 1 && lines[lines.length - 1].length === 0) lines.pop();
      pre.textContent = '';
      lines.forEach(line => {
        const text = line.map(s => s[0]).join('');
        const indent = text.length - text.trimStart().length;
        const block = document.createElement('span');
        block.className = 'book-line';
        block.style.paddingLeft = `${indent + 4}ch`;
        block.style.textIndent = `-${indent + 4}ch`;
        line.forEach(([piece, cls]) => {
          const span = document.createElement('span');
          if (cls) span.className = cls;
          span.textContent = piece;
          block.append(span);
        });
        pre.append(block);
      });
      if (lines.length <= 12) {  // a short box moves to the next page whole
        [pre.closest('div.highlight'), pre.closest('.cell_output .output')]
          .forEach(box => { if (box) box.classList.add('book-short'); });
      } else {  // a long one split by a page leaves at least two lines of text on each side of the break
        const blocks = [...pre.children];
        const texts = blocks.map((b, i) => i).filter(i => blocks[i].textContent.trim() !== '');
        if (texts.length >= 4) {
          blocks.slice(0, texts[1]).forEach(b => b.classList.add('book-keep'));
          blocks.slice(texts[texts.length - 2], -1).forEach(b => b.classList.add('book-keep'));
        }
      }
    });
    // A paragraph that leads into a cell ("In code:") stays whole on the page of the cell's start.
    document.querySelectorAll('p').forEach(p => {
      const next = p.nextElementSibling;
      if (next && next.classList.contains('cell') && p.textContent.trim().endsWith(':')) p.classList.add('book-lead');
    });
    // and so does a cell's input or output frame with at most 12 lines in all
    document.querySelectorAll('.cell_input, .cell_output').forEach(frame => {
      if (frame.querySelectorAll('pre .book-line').length <= 12 && !frame.querySelector('img, svg, table'))
        frame.classList.add('book-short');
    });
    // Parts: a title page before each part's first chapter; the outline in document order.
    // The single page repeats section ids across chapters ("the-question"): each contents entry gets its own.
    const entries = [];
    const entry = (level, title, el) => {
      el.id = el.id && document.querySelectorAll('#' + CSS.escape(el.id)).length === 1 ? el.id
        : 'book-entry-' + entries.length;
      entries.push({level: level, title: title, id: el.id});
    };
    const article = document.querySelector('.bd-article') || document.body;
    const front = article.querySelector('section');
    const frontHeading = front && front.querySelector('h1');
    if (front && frontHeading) {  // the cover carries the title: the front page is the book's preface
      frontHeading.textContent = 'About this book';
      entry(0, 'About this book', frontHeading);
    }
    let numeral = 0;
    const roman = ['I', 'II', 'III', 'IV', 'V', 'VI', 'VII', 'VIII', 'IX', 'X'];
    parts.forEach((part, p) => {
      const anchors = part.docs.map(doc => document.getElementById('document-' + doc)).filter(Boolean);
      if (anchors.length === 0) return;
      const partId = 'book-part-' + (p + 1);
      if (part.numbered) {
        const page = document.createElement('div');
        page.className = 'book-part';
        page.id = partId;
        const label = document.createElement('div');
        label.className = 'book-part-number';
        label.textContent = 'Part ' + roman[numeral++];
        const title = document.createElement('div');
        title.className = 'book-part-title';
        title.textContent = part.caption;
        page.append(label, title);
        anchors[0].before(page);
      } else {
        const mark = document.createElement('span');  // inside the first chapter: on its first page
        mark.id = partId;
        const first = anchors[0].nextElementSibling;
        if (first && first.tagName === 'SECTION') first.prepend(mark); else anchors[0].before(mark);
      }
      entries.push({level: 0, title: (part.numbered ? 'Part ' + roman[numeral - 1] + '. ' : '') + part.caption,
                    id: partId});  // unique by construction
      anchors.forEach(anchor => {
        const chapter = anchor.nextElementSibling;
        if (!chapter || chapter.tagName !== 'SECTION') return;
        const h = chapter.querySelector('h1, h2');
        entry(1, h.textContent.replace(/#$/, '').trim(), h);
        chapter.querySelectorAll(':scope > section').forEach(section => {
          const sh = section.querySelector('h2, h3, h4');
          if (sh) entry(2, sh.textContent.replace(/#$/, '').trim(), sh);
        });
      });
    });
    // The contents, with a page-number slot per entry (filled once the first print has said where they land).
    const nav = document.createElement('nav');
    nav.className = 'book-contents';
    const heading = document.createElement('h1');
    heading.textContent = 'Contents';
    const list = document.createElement('ol');
    entries.forEach(e => {
      const li = document.createElement('li');
      li.className = 'level-' + e.level;
      const a = document.createElement('a');
      a.href = '#' + e.id;
      a.textContent = e.title;
      const dots = document.createElement('span');
      dots.className = 'dots';
      const num = document.createElement('span');
      num.className = 'page';
      num.dataset.target = e.id;
      num.textContent = '000';
      li.append(a, dots, num);
      list.append(li);
    });
    nav.append(heading, list);
    article.prepend(nav);
    return entries;
  },

  // A page break before each of these headings (a heading whose page flips between two prints).
  breakBefore(ids) {
    ids.forEach(id => {
      const el = document.getElementById(id);
      // the heading itself (a section's own id would put the break before the enclosing chapter instead)
      const target = el && (el.matches('h1, h2, h3, h4') ? el : (el.querySelector('h1, h2, h3, h4') || el));
      if (target) target.style.breakBefore = 'page';
    });
  },

  // The contents' page numbers ({id: page}); an entry marked unnumbered keeps its empty slot.
  fillPages(pages) {
    document.querySelectorAll('nav.book-contents .page').forEach(
      s => { if (!s.dataset.unnumbered) s.textContent = pages[s.dataset.target] ?? '?'; });
  },

  // These entries' contents lines show no page number.
  unnumber(ids) {
    document.querySelectorAll('nav.book-contents .page').forEach(s => {
      if (ids.includes(s.dataset.target)) { s.dataset.unnumbered = '1'; s.textContent = ''; }
    });
  },
};
