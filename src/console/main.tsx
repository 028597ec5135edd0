/** The console's entry point (bundled by scripts/build-console.mjs into dist/console/assets/). */
import { render } from 'preact';
import { App } from './app.js';
import './styles.css';

render(<App />, document.getElementById('app')!);
