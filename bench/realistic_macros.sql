-- realistic_macros: the word lists of bench/realistic_inventory.sql, as macros over a
-- non-negative BIGINT (each takes x modulo its list's length): constant lists, so that the
-- query indexes them without carrying them on every row.
CREATE OR REPLACE TEMP MACRO inv_word(x) AS [
    'black', 'white', 'blue', 'red', 'green', 'grey', 'large', 'small', 'mini', 'pro',
    'classic', 'premium', 'organic', 'wireless', 'stainless', 'steel', 'cotton', 'linen',
    'leather', 'wooden', 'garden', 'kitchen', 'outdoor', 'indoor', 'vintage', 'modern',
    'slim', 'fit', 'running', 'hiking', 'winter', 'summer', 'edition', 'set', 'pack',
    'kit', 'lamp', 'chair', 'table', 'sofa', 'jacket', 'shoes', 'boots', 'dress', 'shirt',
    'watch', 'phone', 'case', 'charger', 'cable', 'speaker', 'headphones', 'camera',
    'lens', 'bag', 'backpack', 'bottle', 'mug', 'knife', 'pan', 'rug', 'pillow', 'towel',
    'blanket'][1 + (x) % 64];
-- the catalogue's sections after 'products' (k = 1..17): a long tail
CREATE OR REPLACE TEMP MACRO inv_section(k) AS [
    'home-garden', 'fashion', 'electronics', 'sports', 'beauty', 'toys', 'books', 'food',
    'auto', 'health', 'blog', 'help', 'stores', 'brands', 'deals', 'guides', 'recipes'][k];
CREATE OR REPLACE TEMP MACRO inv_sub(x) AS [
    'new-arrivals', 'bestsellers', 'accessories', 'men', 'women', 'kids', 'sale', 'outlet',
    'lighting', 'furniture', 'audio', 'computers', 'running', 'cycling', 'skincare',
    'fragrance', 'board-games', 'fiction', 'snacks', 'tyres'][1 + (x) % 20];
CREATE OR REPLACE TEMP MACRO inv_group(x) AS [
    'under-50', 'premium', 'eco', 'bundles', 'limited', 'gift-ideas'][1 + (x) % 6];
-- raw UTF-8: cities, accented words, Japanese
CREATE OR REPLACE TEMP MACRO inv_utf8(x) AS [
    'café-crème', 'zürich', 'são-paulo', 'kraków', 'málaga', 'göteborg', 'crème-brûlée',
    '東京', '大阪-ガイド', '日本語-ブログ', 'ñandú', 'İstanbul'][1 + (x) % 12];
-- percent-encoded (uppercase as most sites write them; two of ten lowercase)
CREATE OR REPLACE TEMP MACRO inv_percent(x) AS [
    'caf%C3%A9-cr%C3%A8me', 'z%C3%BCrich', 's%C3%A3o-paulo', 'krak%C3%B3w', 'm%C3%A1laga',
    'new%20york', 'g%C3%B6teborg', '%E6%9D%B1%E4%BA%AC', 'caf%c3%a9-cr%c3%a8me',
    'z%c3%bcrich'][1 + (x) % 10];
CREATE OR REPLACE TEMP MACRO inv_apostrophe(x) AS [
    'o''neill', 'men''s', 'women''s', 'kids''', 'l''oreal', 'levi''s'][1 + (x) % 6];
CREATE OR REPLACE TEMP MACRO inv_root(x) AS [
    'about-us', 'contact', 'summer-sale', 'black-friday', 'gift-cards', 'stores-near-you',
    'sustainability', 'careers', 'press', 'returns', 'shipping', 'size-guide'][1 + (x) % 12];
CREATE OR REPLACE TEMP MACRO inv_changefreq(x) AS [
    'daily', 'weekly', 'weekly', 'monthly', 'monthly', 'monthly', 'yearly', 'hourly',
    'never', 'always'][1 + (x) % 10];
