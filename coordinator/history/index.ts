/** History: every machine's results over time, as series with their change points, and the page's export. */
export { History, HISTORY_PAGE, paramFilter, type HistoryQuery } from './history.js';
export { exportableHistory, historyDoc } from './history-view.js';
