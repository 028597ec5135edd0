/** Intrinsics captured when the bundle loads, before any expression runs (and frozen by seal() anyway). */
export const O = Object;
export const { freeze, defineProperty, getOwnPropertyDescriptor, getPrototypeOf } = Object;
export const ownKeys = Reflect.ownKeys;
export const apply = Reflect.apply;
export const ArrayIsArray = Array.isArray;
export const JSONparse = JSON.parse;
export const JSONstringify = JSON.stringify;
export const StringCtor = String;
export const MapCtor = Map;
export type SetType<T> = Set<T>;
export const SetCtor = Set;
export const WeakMapCtor = WeakMap;
export const WeakSetCtor = WeakSet;
