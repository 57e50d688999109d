// Keyboard shortcuts, page-wide, and the "?" overlay that lists them. Keys
// act only when no text field has the focus (so typing a "j" or a "/" in a
// message is typing), and never with Ctrl, Alt or Meta (the browser's own).
// Esc stopping a turn lives with the session view (session.tsx); here Esc
// only closes the overlay, and then does nothing else.

import { useEffect, useRef, useState } from "react";

/** What each key does, as the overlay lists it. */
export const SHORTCUTS: readonly (readonly [string, string])[] = [
  ["/", "search the sessions (in a session: the message box)"],
  ["n", "new session: the start form's first message"],
  ["j / k", "next / previous session in the list"],
  ["Enter", "open the selected session"],
  ["Esc", "stop the turn (in a session); close this help"],
  ["?", "show or hide this help"],
];

/** The list's search box (when the list has one), else where a new message is typed. */
const SEARCH = "[data-testid=search], input[type=search]";
const START_PROMPT = "[data-testid=start-prompt]";
const COMPOSER = "[data-testid=input]";
/** Each session row's link, in page order. */
const ROW_LINKS = "[data-testid=session-row] a[href^='#/s/']";

/** Whether a key pressed there is typing, not a shortcut. */
function typing(target: EventTarget | null): boolean {
  if (!(target instanceof HTMLElement)) return false;
  return target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName);
}

/** Focuses the first element matching `selector`, waiting a few frames for a route change to render it. */
function focusSoon(selector: string, frames = 60) {
  const el = document.querySelector<HTMLElement>(selector);
  if (el) el.focus();
  else if (frames > 0) requestAnimationFrame(() => focusSoon(selector, frames - 1));
}

/** Moves the focus to the next (+1) or previous (-1) session row's link. */
function moveInList(step: 1 | -1) {
  const links = [...document.querySelectorAll<HTMLAnchorElement>(ROW_LINKS)];
  if (links.length === 0) return;
  const at = links.findIndex((a) => a === document.activeElement || a.closest("tr")?.contains(document.activeElement));
  const next = at < 0 ? (step > 0 ? 0 : links.length - 1) : Math.min(links.length - 1, Math.max(0, at + step));
  links[next]!.focus();
  links[next]!.scrollIntoView({ block: "nearest" });
}

/** The shortcuts' handler and the help button and overlay (place it in the top bar). */
export function Shortcuts() {
  const [open, setOpen] = useState(false);
  const openRef = useRef(open);
  openRef.current = open;

  useEffect(() => {
    // Capture phase: an Esc that closes the help must not reach the session's Esc (stop).
    const onKey = (ev: KeyboardEvent) => {
      if (ev.key === "Escape" && openRef.current) {
        ev.preventDefault();
        ev.stopPropagation();
        setOpen(false);
        return;
      }
      if (ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev.target)) return;
      const inList = !location.hash.startsWith("#/s/");
      switch (ev.key) {
        case "?":
          setOpen((o) => !o);
          break;
        case "/":
          focusSoon(inList ? (document.querySelector(SEARCH) ? SEARCH : START_PROMPT) : COMPOSER, 0);
          break;
        case "n":
          if (!inList) location.hash = "#/";
          focusSoon(START_PROMPT);
          break;
        case "j":
        case "k":
          if (!inList) return;
          moveInList(ev.key === "j" ? 1 : -1);
          break;
        default:
          return;
      }
      ev.preventDefault();
    };
    window.addEventListener("keydown", onKey, true);
    return () => window.removeEventListener("keydown", onKey, true);
  }, []);

  return (
    <>
      <button type="button" className="help-button" data-testid="help-button" title="keyboard shortcuts (?)" onClick={() => setOpen(true)}>
        ?
      </button>
      {open && (
        <div className="help-backdrop" data-testid="help" onClick={() => setOpen(false)}>
          <div className="help-card card" role="dialog" aria-modal="true" aria-label="keyboard shortcuts" onClick={(ev) => ev.stopPropagation()}>
            <h2>Keyboard shortcuts</h2>
            <table className="keys">
              <tbody>
                {SHORTCUTS.map(([key, what]) => (
                  <tr key={key}>
                    <td>
                      <kbd>{key}</kbd>
                    </td>
                    <td>{what}</td>
                  </tr>
                ))}
              </tbody>
            </table>
            <p className="muted small">Keys act when no text field has the focus; in the message box, Enter sends.</p>
            <button type="button" className="ghost" data-testid="help-close" onClick={() => setOpen(false)}>
              Close
            </button>
          </div>
        </div>
      )}
    </>
  );
}
