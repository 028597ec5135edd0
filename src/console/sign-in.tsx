/**
 * Sign-in: a scoped token, a preshared key or a JWT, whatever the server accepts as a bearer credential. The console
 * checks it with `GET /session` before using it, and keeps it as ./credential.ts says.
 */
import { useState } from 'preact/hooks';
import { Api, type Problem, type Session } from './api.js';
import { ProblemView, problemOf } from './components.js';

export function SignIn({ problem, onSignedIn }: { problem?: Problem; onSignedIn: (api: Api, session: Session, remember: boolean) => void }) {
  const [token, setToken] = useState('');
  const [remember, setRemember] = useState(false);
  const [refused, setRefused] = useState<Problem | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    setBusy(true);
    const api = new Api(token.trim());
    try {
      onSignedIn(api, await api.session(), remember);
    } catch (error) {
      setRefused(problemOf(error));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="sign-in" id="main">
      <h1>cfgu console</h1>
      <p>This server needs a credential: a scoped token, a preshared key or a JWT its issuer signed.</p>
      {problem && !refused && <ProblemView problem={problem} title="Signed out" />}
      <form onSubmit={submit}>
        <label for="token">Token or JWT</label>
        <input id="token" type="password" autocomplete="off" spellcheck={false} required value={token} onInput={(e) => setToken((e.target as HTMLInputElement).value)} />
        <label class="check">
          <input type="checkbox" checked={remember} onChange={(e) => setRemember((e.target as HTMLInputElement).checked)} /> Keep me signed in in this tab
          (until it closes)
        </label>
        <button type="submit" disabled={busy || token.trim() === ''}>
          Sign in
        </button>
      </form>
      {refused && <ProblemView problem={refused} title="Not signed in" />}
    </main>
  );
}
