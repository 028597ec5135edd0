/**
 * Where the console keeps the credential it signs in with: in the page's memory only, so closing or reloading the tab
 * forgets it; or, when the user ticks "keep me signed in in this tab", in the tab's sessionStorage (gone when the tab
 * closes, never shared with other tabs, never localStorage). Nothing else the console learns is stored: values,
 * hidden or not, live only in the page.
 */
const KEY = 'cfgu-console-token';

export function storedToken(): string | undefined {
  try {
    return sessionStorage.getItem(KEY) ?? undefined;
  } catch {
    return undefined;
  }
}

export function keepToken(token: string | undefined, remember: boolean): void {
  try {
    if (token !== undefined && remember) sessionStorage.setItem(KEY, token);
    else sessionStorage.removeItem(KEY);
  } catch {
    // storage refused (a private window's policy): the token stays in memory only
  }
}
