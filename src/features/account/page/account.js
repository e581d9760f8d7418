// The account pages' one script (a file, not inline: the pages' policy says script-src 'self').
// It posts the form with the token from the page's address to the API named by the form's
// data-api attribute (BASE_PATH included), then shows the answer in the status region and
// moves the focus there, so keyboard and screen-reader users hear the outcome.
const form = document.querySelector("form[data-api]");
const status = document.getElementById("status");
const token = new URLSearchParams(location.search).get("token");

function show(kind, message, details) {
  status.className = kind;
  status.setAttribute("role", kind === "error" ? "alert" : "status");
  status.replaceChildren(document.createTextNode(message));
  if (details && details.length > 0) {
    const list = document.createElement("ul");
    for (const line of details) {
      const item = document.createElement("li");
      item.textContent = line;
      list.append(item);
    }
    status.append(list);
  }
  status.hidden = false;
  status.focus();
}

if (!token) {
  form.hidden = true;
  show("error", form.dataset.noToken);
} else {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { token };
    for (const input of form.querySelectorAll("input[name]")) body[input.name] = input.value;
    const button = form.querySelector("button");
    button.disabled = true;
    try {
      const response = await fetch(form.dataset.api, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify(body),
      });
      const answer = await response.json().catch(() => ({}));
      if (response.ok) {
        form.hidden = true;
        show("success", form.dataset.done);
      } else {
        show("error", answer.message || form.dataset.failed, answer.errors);
      }
    } catch {
      show("error", form.dataset.failed);
    } finally {
      button.disabled = false;
    }
  });
}
